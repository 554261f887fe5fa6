// The command line beyond what yargs checks by itself: the environment as flags (STUB_PROVIDER_<FLAG>,
// `NO_` for a boolean's negation), words that are no command, and "did you mean" for unknown flags.
// cli.ts calls these from a yargs middleware (before validation) and from its fail handler.

export const ENV_PREFIX = 'STUB_PROVIDER_';

/** A command line error found by these checks; cli.ts prints it with the usage hint (exit 2). */
export class CliUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliUsageError';
  }
}

/** What yargs knows of the current command's options (`yargs.getOptions()`, the parts used here). */
export interface KnownOptions {
  key: Record<string, unknown>;
  boolean: string[];
  array: string[];
  number: string[];
  alias: Record<string, string[]>;
}

/** Every command's flags, for telling "another command's flag" from "no flag at all". */
export interface AllFlags {
  /** Command name -> its own flags (kebab-case). */
  byCommand: Record<string, readonly string[]>;
  /** The yes/no flags of every command (the global ones included). */
  booleans: ReadonlySet<string>;
}

/** Flags that are not settings (yargs' own). */
const NOT_FROM_ENV = new Set(['help', 'version']);

const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const camel = (s: string) => s.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const envName = (flag: string) => `${ENV_PREFIX}${flag.toUpperCase().replace(/-/g, '_')}`;

/** The options' own names (kebab-case) and their aliases to those names. */
function namesOf(o: KnownOptions): { names: Set<string>; canonical: Map<string, string> } {
  const aliasOf = new Map<string, string>();
  for (const [k, as] of Object.entries(o.alias)) for (const a of as) if (a !== k && a !== camel(k)) aliasOf.set(a, k);
  const names = new Set<string>();
  const canonical = new Map<string, string>();
  for (const k of Object.keys(o.key)) {
    if (aliasOf.has(k) && aliasOf.get(k) !== k) continue;
    const n = kebab(k);
    names.add(n);
    canonical.set(n, n);
    canonical.set(k, n);
  }
  for (const [a, k] of aliasOf) canonical.set(a, kebab(k));
  return { names, canonical };
}

/** The options given on the command line (by their own names), however spelt: --x, --x=v, --no-x, -o, -yo. */
export function givenOnCommandLine(args: readonly string[], o: KnownOptions): Set<string> {
  const { canonical } = namesOf(o);
  const given = new Set<string>();
  for (const a of args) {
    if (a === '--') break;
    if (a.startsWith('--')) {
      const name = kebab(a.slice(2).split('=')[0]!);
      const own = canonical.get(name) ?? (name.startsWith('no-') ? canonical.get(name.slice(3)) : undefined);
      if (own) given.add(own);
    } else if (/^-[A-Za-z]/.test(a)) {
      for (const ch of a.slice(1).split('=')[0]!) {
        const own = canonical.get(ch);
        if (own) given.add(own);
      }
    }
  }
  return given;
}

/**
 * Applies STUB_PROVIDER_<FLAG> variables to `argv` for the options the command line did not give
 * (the command line wins). STUB_PROVIDER_NO_<FLAG> is the negation of a boolean flag, as --no-<flag>
 * is. A variable naming another command's flag is not for this command and is left alone; one that
 * names no flag of any command is an error, with the closest flag's variable when there is one.
 */
export function applyEnvironment(
  argv: Record<string, unknown>,
  o: KnownOptions,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  all: AllFlags,
): void {
  const { names } = namesOf(o);
  const booleans = new Set(o.boolean.map(kebab));
  const arrays = new Set(o.array.map(kebab));
  const numbers = new Set(o.number.map(kebab));
  const given = givenOnCommandLine(args, o);
  const anyCommand = new Set([...names, ...Object.values(all.byCommand).flat()]);
  for (const [variable, value] of Object.entries(env).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (!variable.startsWith(ENV_PREFIX) || value === undefined || variable.includes('__')) continue;
    let flag = variable.slice(ENV_PREFIX.length).toLowerCase().replace(/_/g, '-');
    let negate = false;
    if (!names.has(flag) && flag.startsWith('no-') && all.booleans.has(flag.slice(3))) {
      flag = flag.slice(3);
      negate = true;
    }
    if (!names.has(flag) || NOT_FROM_ENV.has(flag)) {
      if (anyCommand.has(flag) && !NOT_FROM_ENV.has(flag)) continue;
      const near = closest(
        flag,
        [...anyCommand].filter((f) => !NOT_FROM_ENV.has(f)),
      );
      throw new CliUsageError(
        `environment variable ${variable} matches no flag of stub-provider (${ENV_PREFIX}<FLAG> sets --<flag>, e.g. ` +
          `${envName('log-level')} for --log-level)${near ? `: did you mean ${envName(near)} (--${near})?` : ''}`,
      );
    }
    if (given.has(flag)) continue;
    let v: unknown = value;
    if (booleans.has(flag)) {
      const b = parseBoolean(value);
      if (b === undefined)
        throw new CliUsageError(
          `environment variable ${variable}=${JSON.stringify(value)}: expected true or false (1/0, yes/no)`,
        );
      v = negate ? !b : b;
    } else if (negate) {
      throw new CliUsageError(
        `environment variable ${variable}: --${flag} is not a yes/no flag, so it has no NO_ form; set ${envName(flag)}`,
      );
    } else if (arrays.has(flag)) v = [value];
    else if (numbers.has(flag)) {
      // As yargs gives a number flag a number: the command's parse reads numbers, not text.
      v = value.trim() === '' ? Number.NaN : Number(value);
      if (!Number.isFinite(v))
        throw new CliUsageError(`environment variable ${variable}=${JSON.stringify(value)}: expected a number`);
    }
    argv[flag] = v;
    if (camel(flag) !== flag) argv[camel(flag)] = v;
  }
}

function parseBoolean(v: string): boolean | undefined {
  const s = v.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(s)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(s)) return false;
  return undefined;
}

/**
 * Words that are not a command (`stub-provider plna`) or that follow one that takes none (`stub-provider
 * plan bare-metal`): a stray word is a typo. A `takesOneWord` command (completion: its shell) has had
 * that word taken out by yargs; any other is refused as well.
 */
export function checkWords(
  words: readonly unknown[],
  commands: readonly string[],
  takesOneWord: ReadonlySet<string> = new Set(),
): void {
  const w = words.map(String);
  if (w.length === 0) return;
  const command = commands.includes(w[0]!) ? w[0] : undefined;
  const extra = command ? w.slice(1) : w;
  if (extra.length === 0) return;
  const word = extra[0]!;
  if (!command) {
    const near = closest(word, commands);
    throw new CliUsageError(
      `unknown command ${JSON.stringify(word)}${near ? `: did you mean ${near}?` : ''} (commands: ` +
        `${commands.join(', ')}; flags start with --)`,
    );
  }
  if (takesOneWord.has(command))
    throw new CliUsageError(`stub-provider ${command} takes one word, not also ${JSON.stringify(word)}`);
  throw new CliUsageError(
    `stub-provider ${command} takes no argument ${JSON.stringify(word)}: values go after their flag, e.g. --id ${word}`,
  );
}

/**
 * yargs' "Unknown argument(s): a, b" for the flags it does not know (it names each twice, as given
 * and in camelCase), as one message with a suggestion each: the closest flag of this command, the
 * command that has that flag, and for --dry-run the command that is the dry run.
 */
export function unknownFlagsMessage(
  msg: string,
  o: KnownOptions | undefined,
  command: string | undefined,
  all: AllFlags,
): string | undefined {
  const m = /^Unknown arguments?: (.+)$/.exec(msg);
  if (!m) return undefined;
  const own = o ? [...namesOf(o).names].filter((f) => !NOT_FROM_ENV.has(f)) : [];
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const raw of m[1]!.split(', ')) {
    const flag = kebab(raw);
    if (seen.has(flag)) continue;
    seen.add(flag);
    const dash = flag.length === 1 ? '-' : '--';
    if (flag === 'dry-run' || flag === 'dryrun' || flag === 'check') {
      parts.push(
        `${dash}${flag}: there is no such flag; \`stub-provider plan\` (same --id and flags) is the dry run: it ` +
          `shows what a run would change and writes nothing`,
      );
      continue;
    }
    const elsewhere = Object.entries(all.byCommand)
      .filter(([c, fs]) => c !== command && fs.includes(flag))
      .map(([c]) => c);
    if (elsewhere.length > 0) {
      parts.push(
        `${dash}${flag} is a flag of \`stub-provider ${elsewhere.join('` and `stub-provider ')}\`, not of ` +
          `${command ? `\`stub-provider ${command}\`` : 'this command'}`,
      );
      continue;
    }
    const near = closest(flag, own);
    parts.push(`unknown flag ${dash}${flag}${near ? `: did you mean --${near}?` : ''}`);
  }
  return parts.join('; ');
}

/**
 * The one-line message of a command line that yargs refused (its fail handler): unknown flags with
 * suggestions, invalid choices, and otherwise yargs' own words on one line. An unknown flag is named
 * before a missing required one: `--idd bare-metal` is a typo of --id, not a missing --id.
 */
export function usageMessage(
  msg: string,
  args: readonly string[],
  current: { command: string | undefined; options: KnownOptions } | undefined,
  all: AllFlags,
): string {
  const o = current?.options;
  if (o && msg.startsWith('Missing required argument')) {
    const unknown = unknownOnCommandLine(args, o);
    if (unknown.length > 0) msg = `Unknown arguments: ${unknown.join(', ')}`;
  }
  return (
    unknownFlagsMessage(msg, o, current?.command, all) ??
    invalidChoicesMessage(msg, args, o) ??
    msg
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .join(' ')
  );
}

/** The flags of `args` (before `--`) that name no option of `o`, by the names they were given as. */
export function unknownOnCommandLine(args: readonly string[], o: KnownOptions): string[] {
  const { canonical } = namesOf(o);
  const known = (n: string) =>
    NOT_FROM_ENV.has(n) || canonical.has(n) || (n.startsWith('no-') && canonical.has(n.slice(3)));
  const unknown: string[] = [];
  for (const a of args) {
    if (a === '--') break;
    if (a.startsWith('--')) {
      const name = kebab(a.slice(2).split('=')[0]!);
      if (name !== '' && !known(name)) unknown.push(name);
    } else if (/^-[A-Za-z]/.test(a)) {
      for (const ch of a.slice(1).split('=')[0]!) if (!known(ch)) unknown.push(ch);
    }
  }
  return [...new Set(unknown)];
}

/**
 * yargs' "Invalid values:" (a line per flag, each `Argument: output, Given: "jsn", Choices: "text",
 * ...`) as one line: `--output "jsn": expected text, json or yaml`, or the variable that gave it.
 */
function invalidChoicesMessage(msg: string, args: readonly string[], o: KnownOptions | undefined): string | undefined {
  if (!msg.startsWith('Invalid values:')) return undefined;
  const given = o ? givenOnCommandLine(args, o) : undefined;
  const parts: string[] = [];
  for (const m of msg.matchAll(/Argument: ([^,]+), Given: (.*), Choices: (.*)$/gm)) {
    const flag = kebab(m[1]!);
    const choices = [...m[3]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((c) => c[1]!);
    const list = choices.length > 1 ? `${choices.slice(0, -1).join(', ')} or ${choices.at(-1)!}` : choices.join('');
    const from = given && !given.has(flag) ? `environment variable ${envName(flag)}=` : `--${flag} `;
    parts.push(`${from}${m[2]!}: expected ${list}`);
  }
  return parts.length > 0 ? parts.join('; ') : undefined;
}

/** The candidate nearest to `word` by edit distance, if it is near enough to be a typo of it. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestD || (d === bestD && best !== undefined && c < best)) [best, bestD] = [c, d];
  }
  // A third of the word may be wrong (plna -> plan, machines -> machine), and at least one letter.
  return best !== undefined && bestD <= Math.max(1, Math.floor(word.length / 3)) ? best : undefined;
}

/** Levenshtein distance with adjacent transpositions counted as one edit (plna -> plan is 1). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
