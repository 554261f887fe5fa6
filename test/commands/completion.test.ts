// `stub-provider completion bash|zsh|fish` run by the real shells, with stub-provider NOT on PATH (as
// for an npx install): what each offers after `stub-provider `, after a flag that takes a choice or a
// path, after `completion`, and for `npx stub-provider`. zsh's completion system is stood in for by
// functions that print what they were asked to offer (compadd, _describe, _files), the script itself
// runs in zsh; fish and bash complete with their own engines (`complete -C`, the function that
// `complete -p` names). .ci/run installs zsh and fish.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Options } from 'yargs';
import { completionModel, completionScript, PATH_FLAGS } from '../../src/commands/completion.js';
import { allFlags, COMMANDS } from '../../src/commands/index.js';
import { globalOptions } from '../../src/commands/options.js';
import { UsageError } from '../../src/exit-codes.js';

const dir = mkdtempSync(join(tmpdir(), 'completion-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A clean environment: stub-provider is nowhere on this PATH. */
const ENV = { PATH: '/usr/bin:/bin', HOME: dir, LANG: 'C.UTF-8' };

function shell(program: string, args: string[]): { out: string; err: string } {
  const missing = spawnSync(program, ['-c', 'exit 0'], { env: ENV, timeout: 10_000 });
  if (missing.error || missing.status !== 0)
    throw new Error(`${program} is not installed: apt-get install -y zsh fish (.ci/run installs them)`);
  const r = spawnSync(program, args, { env: ENV, encoding: 'utf8', timeout: 30_000 });
  expect(r.status, r.stderr).toBe(0);
  return { out: r.stdout, err: r.stderr };
}

function scriptFile(sh: 'bash' | 'zsh' | 'fish'): string {
  const f = join(dir, `stub-provider.${sh}`);
  writeFileSync(f, completionScript(sh));
  return f;
}

/** Each command line (the last word is being completed) -> the words offered, by one run of `program`. */
function offered(program: 'bash' | 'zsh' | 'fish', lines: string[]): Record<string, string[]> {
  const script = scriptFile(program);
  const driver = join(dir, `driver.${program}`);
  if (program === 'bash') {
    writeFileSync(
      driver,
      `source "$1"; shift
for line in "$@"; do
  read -ra COMP_WORDS <<< "$line"; [[ "$line" == *' ' ]] && COMP_WORDS+=('')
  COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
  fn=$(complete -p "\${COMP_WORDS[0]}" | sed 's/.*-F \\([^ ]*\\) .*/\\1/'); "$fn"
  printf '%s\\t%s\\n' "$line" "\${COMPREPLY[*]}"
done
`,
    );
  } else if (program === 'zsh') {
    writeFileSync(
      driver,
      `compdef() { }
compadd() { [[ $1 == -- ]] && shift; got+=("$@") }
_describe() { local -a specs; specs=("\${(@P)4}"); got+=("\${(@)specs%%:*}") }
_files() { got+=("<files$*>") }
_default() { got+=("<default>") }
source $1; shift
for line in "$@"; do
  words=(\${(z)line}); [[ $line == *' ' ]] && words+=('')
  CURRENT=\${#words}; got=(); _stub_provider
  print -r -- "$line"$'\\t'"\${(j: :)got}"
done
`,
    );
  } else {
    writeFileSync(
      driver,
      `source $argv[1]
for line in $argv[2..-1]
  printf '%s\\t%s\\n' $line (string join -- ' ' '' (complete -C $line | string replace -r '\\t.*' ''))
end
`,
    );
  }
  const noRc = { bash: '--norc', zsh: '-f', fish: '--no-config' }[program];
  const { out, err } = shell(program, [noRc, driver, script, ...lines]);
  expect(err).toBe('');
  return Object.fromEntries(
    out
      .trimEnd()
      .split('\n')
      .map((l) => {
        const [line = '', words = ''] = l.split('\t');
        // zsh's own compadd keeps what starts with the word being completed; its stand-in here does not.
        const prefix = program === 'zsh' ? line.slice(line.lastIndexOf(' ') + 1) : '';
        return [line, words.split(' ').filter((w) => w !== '' && (w.startsWith(prefix) || w.startsWith('<')))];
      }),
  );
}

/** Every flag of the default command (run), as a person types it, and its one-letter aliases. */
const runFlags = Object.entries<Options>({ ...COMMANDS.run.options, ...globalOptions }).flatMap(([name, o]) => [
  `--${name}`,
  ...[o.alias ?? []].flat().map((a) => `-${a}`),
]);

describe.each(['bash', 'zsh', 'fish'] as const)('completion %s', (sh) => {
  const lines = [
    'stub-provider -',
    'stub-provider ',
    'stub-provider --out',
    'stub-provider -o ',
    'stub-provider plan --from-dump walk',
    'stub-provider plan --',
    'stub-provider completion ',
    'npx stub-provider --y',
    'stub-provider sim --keys-dir ',
  ];
  let got: Record<string, string[]>;

  it('runs in the real shell without stub-provider on PATH, and says nothing on stderr', () => {
    got = offered(sh, lines);
    expect(Object.keys(got).sort()).toEqual([...lines].sort());
  });

  it('every flag of the default command at the top level, and no flag that does not exist', () => {
    const top = got['stub-provider -']!;
    expect(top).toEqual(expect.arrayContaining([...runFlags, '--help', '--version', '--no-deregister']));
    const known = new Set([...runFlags, '--help', '-h', '--version', '--no-deregister', '--no-color']);
    expect(top.filter((w) => !known.has(w))).toEqual([]);
    expect(top).not.toContain('--o');
    expect(top).not.toContain('--y');
  });

  it('commands at the top, choices after a flag with them, paths and shipped examples where a flag takes one', () => {
    expect(got['stub-provider ']).toEqual(expect.arrayContaining(['run', 'plan', 'sim', 'demo', 'completion']));
    expect(got['stub-provider --out']).toEqual(['--output']);
    expect(got['stub-provider -o ']!.sort()).toEqual(['json', 'text', 'yaml']);
    expect(got['stub-provider plan --from-dump walk']).toContain('walkthroughs');
    expect(got['stub-provider plan --']).toContain('--from-dump');
    expect(got['stub-provider plan --']).not.toContain('--wait');
    expect(got['stub-provider completion ']).toEqual(expect.arrayContaining(['bash', 'zsh', 'fish']));
    expect(got['npx stub-provider --y']).toEqual(['--yes']);
    if (sh === 'zsh') expect(got['stub-provider sim --keys-dir ']).toEqual(['<files-/>']);
    else expect(got['stub-provider sim --keys-dir ']).not.toEqual([]);
  });
});

describe('the completion model', () => {
  it('every path flag names a flag; every flag named like a path is a path flag', () => {
    const flags = new Set(Object.values(allFlags().byCommand).flat());
    for (const f of Object.keys(PATH_FLAGS)) expect(flags, f).toContain(f);
    const pathLike = [...flags].filter((f) => /(-file|-dir|-out|-log|^report|dump|^scenario)$/.test(f));
    expect(pathLike.filter((f) => !(f in PATH_FLAGS))).toEqual([]);
  });

  it('lists every command with every flag of its table', () => {
    const m = completionModel();
    expect(m.defaultCommand).toBe('run');
    for (const [name, c] of Object.entries(COMMANDS)) {
      const listed = m.commands.find((x) => x.name === name)!.flags.map((f) => f.long);
      expect(listed).toEqual(expect.arrayContaining(Object.keys(c.options).map((k) => `--${k}`)));
    }
  });

  it('a missing or unknown shell is a usage error naming the three', () => {
    expect(() => completionScript(undefined)).toThrow(UsageError);
    expect(() => completionScript(undefined)).toThrow(/completion needs the shell: stub-provider completion bash/);
    expect(() => completionScript('tcsh')).toThrow(
      /completion "tcsh": no script for that shell; give bash, zsh or fish/,
    );
  });
});
