// The completion scripts of `stub-provider completion` (completion.ts builds what they list), one per
// shell, each a static text: the commands, every flag of each (the default command's at the top level
// too), the choices of a flag, paths where a flag takes one. `npx stub-provider ...` is completed the
// same way, where the shell has no completion of its own for npx.

/** What a flag's value is completed with: nothing (a yes/no flag), its choices, paths, or nothing offered (text). */
export type FlagValue =
  | { kind: 'none' }
  | { kind: 'text' }
  | { kind: 'choices'; choices: readonly string[] }
  | { kind: 'file' | 'dir' }
  /** A file, or the name of a shipped example (`--scenario bare-metal-stuck`). */
  | { kind: 'scenario'; choices: readonly string[] };

export interface CompletedFlag {
  /** `--output`; `--no-deregister` is a flag of its own. */
  long: string;
  /** `-o`, for a one-letter alias. */
  short?: string;
  describe: string;
  value: FlagValue;
}

export interface CompletedCommand {
  name: string;
  describe: string;
  flags: CompletedFlag[];
  /** Words it takes after its name (completion: the shells). */
  words: readonly string[];
}

export interface CompletionModel {
  /** Every command, the default one (run) first. */
  commands: CompletedCommand[];
  /** The default command: its flags complete at the top level too. */
  defaultCommand: string;
}

const HEADER = (shell: string, install: string) =>
  `# ${shell} completion for stub-provider, printed by \`stub-provider completion ${shell}\` (static: it never\n` +
  `# runs stub-provider, so it also works for npx and npm exec).\n# ${install}\n`;

/** `'text'` for a POSIX shell (bash, zsh): single quotes, a quote inside closed and reopened. */
const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
/** `'text'` for fish: single quotes, backslash and quote escaped. */
const fq = (s: string) => `'${s.replace(/[\\']/g, (c) => `\\${c}`)}'`;

const spellings = (f: CompletedFlag) => [f.long, ...(f.short ? [f.short] : [])];

export function bashScript(m: CompletionModel): string {
  const names = m.commands.map((c) => c.name).join(' ');
  const cases = m.commands.map((c) => bashCommand(c)).join('\n');
  return `${HEADER('bash', 'Add it to ~/.bashrc.')}
__stub_provider_words() { mapfile -t COMPREPLY < <(compgen -W "$1" -- "$cur"); }
__stub_provider_paths() {
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen "$1" -- "$cur"; [ -n "$2" ] && compgen -W "$2" -- "$cur")
}
_stub_provider() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" at=1 cmd=${m.defaultCommand} flags
  COMPREPLY=()
  if [[ "\${COMP_WORDS[0]##*/}" == npx ]]; then
    [[ "\${COMP_WORDS[1]}" == stub-provider ]] || return 0
    at=2
  fi
  if (( COMP_CWORD > at )); then
    case "\${COMP_WORDS[at]}" in ${m.commands.map((c) => c.name).join('|')}) cmd="\${COMP_WORDS[at]}" ;; esac
  fi
  case "$cmd" in
${cases}
  esac
  if (( COMP_CWORD == at )); then flags="${names} $flags --version"; fi
  __stub_provider_words "$flags"
}
complete -F _stub_provider stub-provider
complete -p npx >/dev/null 2>&1 || complete -o default -F _stub_provider npx
`;
}

/** `pattern) action` lines of a `case` on the previous word: the flags with the same action share one. */
function valueCases(flags: CompletedFlag[], actionOf: (v: CompletedFlag['value']) => string, end: string): string[] {
  const byAction = new Map<string, string[]>();
  for (const f of flags.filter((x) => x.value.kind !== 'none')) {
    const action = actionOf(f.value);
    byAction.set(action, [...(byAction.get(action) ?? []), ...spellings(f)]);
  }
  return [...byAction].map(([action, names]) => `        ${names.join('|')}) ${action}${end}`);
}

function bashCommand(c: CompletedCommand): string {
  const values = valueCases(
    c.flags,
    (v) =>
      v.kind === 'choices'
        ? `__stub_provider_words ${sq(v.choices.join(' '))}; return 0`
        : v.kind === 'file' || v.kind === 'dir'
          ? `__stub_provider_paths -${v.kind[0]}; return 0`
          : v.kind === 'scenario'
            ? `__stub_provider_paths -f ${sq(v.choices.join(' '))}; return 0`
            : 'return 0',
    ' ;;',
  );
  const words = c.words.length ? `\n      (( COMP_CWORD == at + 1 )) && flags="${c.words.join(' ')} $flags"` : '';
  return `    ${c.name})
      case "$prev" in
${values.join('\n')}
      esac
      flags=${sq(c.flags.flatMap(spellings).join(' '))}${words} ;;`;
}

export function zshScript(m: CompletionModel): string {
  const commands = m.commands.map((c) => sq(`${c.name}:${c.describe.replace(/:/g, '\\:')}`)).join(' ');
  return `${HEADER('zsh', 'Add it to ~/.zshrc.')}
_stub_provider() {
  local at=2 cmd=${m.defaultCommand} prev=\${words[CURRENT-1]}
  local -a flags commands
  commands=(${commands})
  if [[ \${words[1]:t} == npx ]]; then
    [[ \${words[2]} == stub-provider ]] || { _default; return }
    at=3
  fi
  if (( CURRENT > at )); then
    case \${words[at]} in ${m.commands.map((c) => c.name).join('|')}) cmd=\${words[at]} ;; esac
  fi
  case $cmd in
${m.commands.map((c) => zshCommand(c)).join('\n')}
  esac
  if (( CURRENT == at )); then
    flags+=('--version:Show the version')
    _describe -t commands command commands
  fi
  _describe -t flags flag flags
}
if (( ! $+functions[compdef] )); then autoload -Uz compinit && compinit; fi
compdef _stub_provider stub-provider
(( $+_comps[npx] )) || compdef _stub_provider npx
`;
}

function zshCommand(c: CompletedCommand): string {
  const values = valueCases(
    c.flags,
    (v) =>
      v.kind === 'choices'
        ? `compadd -- ${v.choices.map(sq).join(' ')}`
        : v.kind === 'file'
          ? '_files'
          : v.kind === 'dir'
            ? '_files -/'
            : v.kind === 'scenario'
              ? `compadd -- ${v.choices.map(sq).join(' ')}; _files`
              : ':',
    '; return ;;',
  );
  const specs = c.flags.flatMap((f) => spellings(f).map((s) => sq(`${s}:${f.describe.replace(/:/g, '\\:')}`)));
  const words = c.words.length ? `\n      (( CURRENT == at + 1 )) && compadd -- ${c.words.join(' ')}` : '';
  return `    ${c.name})
      case $prev in
${values.join('\n')}
      esac
      flags=(${specs.join(' ')})${words} ;;`;
}

export function fishScript(m: CompletionModel): string {
  const others = (name: string) =>
    m.commands
      .map((c) => c.name)
      .filter((n) => n !== name)
      .join(' ');
  const lines = [
    HEADER('fish', 'Save it as ~/.config/fish/completions/stub-provider.fish.'),
    'complete -c stub-provider -f',
  ];
  for (const c of m.commands)
    lines.push(`complete -c stub-provider -n __fish_use_subcommand -a ${c.name} -d ${fq(c.describe)}`);
  lines.push("complete -c stub-provider -n __fish_use_subcommand -l version -d 'Show the version'");
  for (const c of m.commands) {
    // The default command's flags also before any command word.
    const when =
      c.name === m.defaultCommand
        ? `not __fish_seen_subcommand_from ${others(c.name)}`
        : `__fish_seen_subcommand_from ${c.name}`;
    for (const f of c.flags) lines.push(`complete -c stub-provider -n ${fq(when)} ${fishFlag(f)}`);
    if (c.words.length) lines.push(`complete -c stub-provider -n ${fq(when)} -a ${fq(c.words.join(' '))}`);
  }
  lines.push(
    '',
    '# npx stub-provider ...: the same completions, where npx has none of its own.',
    'function __stub_provider_npx',
    '    set -l tokens (commandline -opc)',
    "    complete -C (string join -- ' ' stub-provider (string escape -- $tokens[3..-1]) (commandline -ct))",
    'end',
    "complete -c npx -n 'test (count (commandline -opc)) -ge 2; and test (commandline -opc)[2] = stub-provider' " +
      "-f -a '(__stub_provider_npx)'",
  );
  return `${lines.join('\n')}\n`;
}

function fishFlag(f: CompletedFlag): string {
  const names = `-l ${f.long.slice(2)}${f.short ? ` -s ${f.short.slice(1)}` : ''}`;
  const v = f.value;
  const value =
    v.kind === 'none'
      ? ''
      : v.kind === 'choices'
        ? ` -x -a ${fq(v.choices.join(' '))}`
        : v.kind === 'file'
          ? ' -r -F'
          : v.kind === 'dir'
            ? " -x -a '(__fish_complete_directories)'"
            : v.kind === 'scenario'
              ? ` -r -F -a ${fq(v.choices.join(' '))}`
              : ' -x';
  return `${names}${value} -d ${fq(f.describe)}`;
}
