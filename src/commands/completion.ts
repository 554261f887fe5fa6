// `stub-provider completion bash|zsh|fish`: a completion script per shell, generated from the
// commands' option tables (commands/index.ts) when it is printed. Static: the script holds every
// command, flag and choice and never runs stub-provider, so it works where the binary is not on
// PATH (npx, npm exec: yargs' own script called `stub-provider --get-yargs-completions` on every Tab).
// The default command's flags complete at the top level, as they are accepted there. `npx
// stub-provider ...` completes too, in a shell that has no completion of its own for npx.
//
// The scripts' wording is in completion-scripts.ts; this file builds what they list.

import type { Options } from 'yargs';
import { UsageError } from '../exit-codes.js';
import { bashScript, fishScript, zshScript } from './completion-scripts.js';
import type { CompletedCommand, CompletedFlag, CompletionModel, FlagValue } from './completion-scripts.js';
import { commands } from './index.js';
import { globalOptions } from './options.js';
import { shippedScenarios } from './scenario-file.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;

/**
 * Flags whose value is a path, by name: yargs' tables have no type for it. A test checks that each
 * name is a flag, and that every flag named like a path is here.
 */
export const PATH_FLAGS: Readonly<Record<string, 'file' | 'dir' | 'scenario'>> = {
  'service-account-key-file': 'file',
  'ca-file': 'file',
  report: 'file',
  'audit-log': 'file',
  dump: 'file',
  'tls-ca-out': 'file',
  'keys-dir': 'dir',
  scenario: 'scenario',
  'from-dump': 'scenario',
};

const HELP: CompletedFlag = { long: '--help', short: '-h', describe: 'Show help', value: { kind: 'none' } };

/** The completion command as cli.ts registers it. */
export const COMPLETION_COMMAND = {
  name: 'completion',
  describe: 'Print a completion script for bash, zsh or fish (static: it works for npx and npm exec too)',
} as const;

/** The commands and their flags, as the scripts list them. */
export function completionModel(): CompletionModel {
  const scenarios = shippedScenarios();
  const out: CompletedCommand[] = commands.map((c) => ({
    name: [c.command].flat()[0]!.split(/\s+/)[0]!,
    describe: shortText(c.describe),
    flags: [...flagsOf({ ...c.options, ...globalOptions }, scenarios), HELP],
    words: [],
  }));
  out.push({
    name: COMPLETION_COMMAND.name,
    describe: shortText(COMPLETION_COMMAND.describe),
    flags: [HELP],
    words: SHELLS,
  });
  return { commands: out, defaultCommand: out[0]!.name };
}

function flagsOf(table: Record<string, Options>, scenarios: readonly string[]): CompletedFlag[] {
  const out: CompletedFlag[] = [];
  for (const [name, o] of Object.entries(table)) {
    const aliases = [o.alias ?? []].flat();
    const short = aliases.find((a) => a.length === 1);
    const path = PATH_FLAGS[name];
    const value: FlagValue =
      o.type === 'boolean'
        ? { kind: 'none' }
        : o.choices
          ? { kind: 'choices', choices: [o.choices].flat().map(String) }
          : path === 'scenario'
            ? { kind: 'scenario', choices: scenarios }
            : path
              ? { kind: path }
              : { kind: 'text' };
    const describe = shortText(o.describe ?? '');
    out.push({ long: `--${name}`, ...(short ? { short: `-${short}` } : {}), describe, value });
    // A yes/no flag that is on unless said otherwise (or has no default, as --color) is also given as --no-<flag>.
    if (o.type === 'boolean' && o.default !== false)
      out.push({ long: `--no-${name}`, describe: `Not --${name}`, value: { kind: 'none' } });
  }
  return out;
}

/** A description's first clause, for a completion menu: up to the first ` (`, `;` or sentence end. */
function shortText(s: string): string {
  const cut = s.split(/ \(|; |(?<!e\.g)\. /)[0]!.trim();
  return cut.length > 72 ? `${cut.slice(0, 71)}…` : cut;
}

/** The script for `shell`; a missing or unknown shell is a usage error naming the three. */
export function completionScript(shell: unknown): string {
  if (shell === undefined || shell === '')
    throw new UsageError('completion needs the shell: stub-provider completion bash (or zsh, or fish)');
  if (!(SHELLS as readonly unknown[]).includes(shell))
    throw new UsageError(
      `completion ${JSON.stringify(String(shell))}: no script for that shell; give bash, zsh or fish`,
    );
  const model = completionModel();
  if (shell === 'bash') return bashScript(model);
  if (shell === 'zsh') return zshScript(model);
  return fishScript(model);
}
