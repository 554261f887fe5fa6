// Every `--flag` the documentation tells an operator to type must exist: README.md and docs/*.md (code
// blocks and code spans) and the args of deploy/job.yaml are checked against the `--help` output of
// the CLI, run in-process. Flags of other tools (omnictl, kubectl, docker, npm, ipmitool, ...) are left
// out by context: in a code block only the words after a `stub-provider` command word count; a code
// span counts when it invokes stub-provider or starts with `--` (the flag tables).

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { commands } from '../../src/commands/index.js';
import { helpOf } from '../helpers/cli-help.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface FlagUse {
  flag: string;
  /** The command named after `stub-provider` (e.g. `plan`), or undefined: the default command or a flag table. */
  command: string | undefined;
  /** `line`: a command line (checked against that command); `table`: a lone flag in a code span (any command). */
  kind: 'line' | 'table';
  where: string;
}

const SHELL_STOP = new Set(['|', '||', '&&', ';', '>', '>>', '2>', '2>&1', '<']);

/** Flags after the `stub-provider` word of one shell line; [] when the line does not run stub-provider. */
function flagsOfCommandLine(line: string, commandNames: Set<string>, where: string): FlagUse[] {
  // A quoted argument is one word, whatever it holds (`--wipe-command "/opt/off --power-off"`).
  const words = line
    .replace(/"(?:\\.|[^"\\])*"|'[^']*'/g, 'ARG')
    .trim()
    .split(/\s+/);
  const at = words.indexOf('stub-provider');
  if (at < 0) return [];
  const after = words.slice(at + 1);
  const command = after[0] !== undefined && commandNames.has(after[0]) ? after[0] : undefined;
  const out: FlagUse[] = [];
  for (const w of after) {
    if (SHELL_STOP.has(w) || w.startsWith('#')) break;
    const m = /^(--[a-z][a-z0-9-]*)/.exec(w);
    if (m) out.push({ flag: m[1]!, command, kind: 'line', where });
  }
  return out;
}

/** Every flag a Markdown text tells an operator to use. */
export function flagsOfMarkdown(text: string, file: string, commandNames: Set<string>): FlagUse[] {
  const out: FlagUse[] = [];
  const lines = text.split('\n');
  let fence: string | undefined;
  let pending = '';
  lines.forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    const f = /^\s*(```+|~~~+)/.exec(line);
    if (f) {
      fence = fence === undefined ? f[1] : line.trim().startsWith(fence) ? undefined : fence;
      pending = '';
      return;
    }
    if (fence !== undefined) {
      if (line.trimEnd().endsWith('\\')) {
        pending += `${line.trimEnd().slice(0, -1)} `;
        return;
      }
      out.push(...flagsOfCommandLine(pending + line, commandNames, where));
      pending = '';
      return;
    }
    for (const m of line.matchAll(/(`+)(.+?)\1/g)) {
      const span = m[2]!.trim();
      if (/(^|\s)stub-provider(\s|$)/.test(span)) out.push(...flagsOfCommandLine(span, commandNames, where));
      else if (span.startsWith('--')) {
        for (const t of span.matchAll(/(?:^|[\s,])(--[a-z][a-z0-9-]*)/g))
          out.push({ flag: t[1]!, command: undefined, kind: 'table', where });
      }
    }
  });
  return out;
}

/** The names a command answers to: its first word and its aliases (`$0` marks the default command). */
function namesOf(c: (typeof commands)[number]): string[] {
  const all = [c.command].flat();
  return all.map((s) => s.split(/\s+/)[0]!);
}

function flagsOfHelp(help: string): Set<string> {
  const set = new Set<string>();
  for (const m of help.matchAll(/(?:^|[\s,[])(--(?:\[no-\])?[a-z][a-z0-9-]*)/gm)) {
    const f = m[1]!;
    if (f.startsWith('--[no-]')) {
      set.add(`--${f.slice(7)}`);
      set.add(`--no-${f.slice(7)}`);
    } else set.add(f);
  }
  // yargs accepts --no-<flag> for every boolean flag it lists.
  for (const line of help.split('\n')) {
    const m = /^\s*(?:-\w, )?(--[a-z][a-z0-9-]*)\b.*\[boolean\]/.exec(line);
    if (m) set.add(`--no-${m[1]!.slice(2)}`);
  }
  return set;
}

let globalFlags: Set<string>;
/** Command name -> its flags (global ones included); '' is the default command, when there is one. */
const flagsByCommand = new Map<string, Set<string>>();
const commandNames = new Set<string>();

beforeAll(async () => {
  globalFlags = flagsOfHelp(await helpOf([]));
  for (const c of commands) {
    const names = namesOf(c);
    const name = names.find((n) => n !== '$0');
    if (!name) continue;
    const flags = new Set([...globalFlags, ...flagsOfHelp(await helpOf([name]))]);
    for (const n of names) {
      commandNames.add(n);
      flagsByCommand.set(n === '$0' ? '' : n, flags);
    }
  }
});

afterEach(() => {
  vi.restoreAllMocks();
});

function docs(): { file: string; text: string }[] {
  const files = [
    'README.md',
    ...readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  return files.map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));
}

function unknownFlags(uses: FlagUse[]): string[] {
  const anyCommand = new Set([...globalFlags, ...[...flagsByCommand.values()].flatMap((s) => [...s])]);
  return uses
    .filter((u) => {
      if (u.kind === 'table') return !anyCommand.has(u.flag);
      // A command line without a command name runs the default command.
      const known = flagsByCommand.get(u.command ?? '') ?? (u.command === undefined ? globalFlags : undefined);
      return !known?.has(u.flag);
    })
    .map((u) => `${u.flag} (${u.where}${u.command ? `, stub-provider ${u.command}` : ''})`);
}

describe('flags in the documentation', () => {
  it('finds the flags of a stub-provider line and ignores other tools', () => {
    const md = [
      '```sh',
      'omnictl infraprovider create --ttl 1h bare-metal',
      'npx stub-provider plan --id x --output json | jq . --raw-output',
      'docker run --rm --read-only stub-provider \\',
      '  --id x --yes   # --not-this',
      '```',
      'Use `--wait` with `--timeout 5m`, not `kubectl logs --follow`; `stub-provider --force`.',
      '`stub-provider --wipe-command "/bin/off --hard" --wipe-timeout 9`',
    ].join('\n');
    const uses = flagsOfMarkdown(md, 'sample.md', new Set(['plan', 'run']));
    expect(uses.map((u) => [u.flag, u.command ?? ''])).toEqual([
      ['--id', 'plan'],
      ['--output', 'plan'],
      ['--id', ''],
      ['--yes', ''],
      ['--wait', ''],
      ['--timeout', ''],
      ['--force', ''],
      ['--wipe-command', ''],
      ['--wipe-timeout', ''],
    ]);
  });

  it('reads a help text, boolean negations included', () => {
    const help =
      'Options:\n      --yes   Do it  [boolean] [default: false]\n  -o, --output  Format  [string]\n      --[no-]color';
    expect([...flagsOfHelp(help)].sort()).toEqual(['--color', '--no-color', '--no-yes', '--output', '--yes']);
  });

  it('every flag in README.md and docs/*.md exists in --help', () => {
    const uses = docs().flatMap(({ file, text }) => flagsOfMarkdown(text, file, commandNames));
    // The guide alone names more than twenty flags: an extractor that finds nothing is broken, not green.
    expect(uses.length).toBeGreaterThan(20);
    expect(unknownFlags(uses)).toEqual([]);
  });

  it('every flag in deploy/job.yaml and the Dockerfile example exists in --help', () => {
    const job = parse(readFileSync(path.join(ROOT, 'deploy/job.yaml'), 'utf8')) as {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    };
    const args = job.spec.template.spec.containers[0]!.args;
    const uses = flagsOfCommandLine(['stub-provider', ...args].join(' '), commandNames, 'deploy/job.yaml');
    // The usage example in the Dockerfile's header comment: `docker run ... \` continued over comment lines.
    const comment = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .map((l) => l.replace(/^#\s*/, ''));
    const start = comment.findIndex((l) => l.startsWith('docker run'));
    expect(start).toBeGreaterThanOrEqual(0);
    let example = '';
    for (const l of comment.slice(start)) {
      example += `${l.replace(/\\$/, '')} `;
      if (!l.endsWith('\\')) break;
    }
    uses.push(...flagsOfCommandLine(example, commandNames, 'Dockerfile'));
    expect(uses.map((u) => u.flag)).toEqual(
      expect.arrayContaining(['--id', '--yes', '--output', '--wait', '--timeout']),
    );
    expect(unknownFlags(uses)).toEqual([]);
  });
});
