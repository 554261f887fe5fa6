// The CLI shell: parse, run the command, map errors to exit codes. Commands live in src/commands/
// (options.ts: what a command is); the environment binding and the "did you mean" checks in cli-args.ts.

import yargs from 'yargs';
import type { Argv } from 'yargs';
import { applyEnvironment, checkWords, CliUsageError, usageMessage } from './cli-args.js';
import type { KnownOptions } from './cli-args.js';
import { COMPLETION_COMMAND, completionScript } from './commands/completion.js';
import { allFlags, COMMANDS, commands } from './commands/index.js';
import { globalOptions } from './commands/options.js';
import type { AnyCommand, CommandName, ConfigOf } from './commands/index.js';
import type { CliContext, Command, Given, OptionTable } from './commands/options.js';
import { describeError, ExitCode, ResultExit } from './exit-codes.js';
import { createLogger } from './log.js';
import { escapeControl } from './omni-api/untrusted.js';
import { addSecretsOf, redact } from './redact.js';
import { VERSION } from './version.js';

const COMPLETION = COMPLETION_COMMAND.name;

/**
 * The command yargs chose, with what it parsed: thrown by the command's yargs handler and caught by
 * `chosen`, so that the command runs after yargs is done. yargs renders the whole help text of a
 * command it ran by a name (to keep it for a later showHelp, which nothing here calls) right after
 * its handler returns: ~40 ms of CPU and the compilation of its text layout on every
 * `stub-provider run` (docs/performance.md, "Issue 27, seventh pass"). A handler that throws skips
 * that; yargs passes on any error that is not its own (and the fail handler below rethrows).
 */
class Chosen {
  constructor(
    readonly command: AnyCommand,
    readonly given: Given<OptionTable>,
  ) {}
}

/** The command a parse chose (see Chosen); undefined when yargs answered itself (help, version, completion). */
async function chosen(parse: () => Promise<unknown>): Promise<Chosen | undefined> {
  try {
    await parse();
    return undefined;
  } catch (e) {
    return asChosen(e);
  }
}

/** `chosen` for a parse that must be synchronous (parseSync). */
function chosenSync(parse: () => unknown): Chosen | undefined {
  try {
    parse();
    return undefined;
  } catch (e) {
    return asChosen(e);
  }
}

/** A Chosen caught, or the error thrown on. */
function asChosen(e: unknown): Chosen {
  if (e instanceof Chosen) return e;
  throw e;
}

/** What the parser hands on besides the command it chose: the completion command's shell. */
interface ParserHandlers {
  onCompletion: (shell: unknown) => void;
  /** The width of --help (a terminal's columns, at most 110). */
  columns?: number | undefined;
}

/**
 * The one parser of the command line, for main() and configFrom(): strict flags (an unknown flag is
 * exit 2, never ignored), the environment as flags, "did you mean". The command yargs chose, and what
 * it parsed with that command's option table, leaves the parse as a thrown Chosen (`chosen`).
 */
function commandLineParser(argv: readonly string[], env: NodeJS.ProcessEnv, handlers: ParserHandlers): Argv {
  const names = [
    ...commands
      .flatMap((c) => [c.command].flat())
      .filter((n) => n !== '$0')
      .map((n) => n.split(/\s+/)[0]!),
    COMPLETION,
  ];
  const flags = allFlags();
  /** The command yargs is running, and its options, for the messages of the fail handler. */
  let current: { command: string | undefined; options: KnownOptions } | undefined;
  const parser = yargs([...argv])
    .scriptName('stub-provider')
    // STUB_PROVIDER_<FLAG> is bound by applyEnvironment (below), not by yargs' .env(): yargs takes
    // STUB_PROVIDER_NO_DEREGISTER for a flag named no-deregister, and an unknown variable for an
    // unknown flag ("Unknown argument: foo") without saying that it came from the environment.
    .strict()
    .version(VERSION)
    .help()
    .alias('h', 'help')
    .options(globalOptions)
    .wrap(Math.min(110, handlers.columns || 110))
    // Before validation, so that a stray word is named before "Missing required argument", and the
    // environment's values are checked like the command line's. (@types/yargs 17 knows neither the
    // second argument nor getOptions, which yargs 18 has.)
    .middleware(
      ((a: { _?: unknown[] }, y: { getOptions(): unknown }) => {
        const options = y.getOptions() as KnownOptions;
        const words = (a._ ?? []).map(String);
        current = { command: names.includes(words[0] ?? '') ? words[0] : 'run', options };
        checkWords(words, names, new Set([COMPLETION]));
        applyEnvironment(a as Record<string, unknown>, options, argv, env, flags);
      }) as never,
      true,
    )
    // Throw, not record: a fail handler that returns lets yargs run the command's handler anyway, so
    // an unknown or mistyped flag (say --machines for --machine) would be ignored, not refused.
    .fail((msg, err) => {
      if (err) throw err;
      throw new CliUsageError(usageMessage(msg, argv, current, flags));
    });
  for (const c of commands) {
    parser.command({
      command: c.command,
      describe: c.describe,
      builder: (y: Argv) => {
        const withOptions = y.options(c.options).strictOptions();
        for (const [cmd, desc] of c.examples) withOptions.example(cmd, desc);
        return withOptions.epilogue(c.epilogue);
      },
      // yargs parsed it with the command's table, and applyEnvironment gave every flag from the
      // environment a value of its declared type: what the table's types say (Given).
      handler: (a) => {
        throw new Chosen(c, a as unknown as Given<OptionTable>);
      },
    });
  }
  parser.command({
    command: `${COMPLETION} [shell]`,
    describe: COMPLETION_COMMAND.describe,
    builder: (y: Argv) =>
      y
        .positional('shell', { type: 'string', describe: 'bash, zsh or fish' })
        .strictOptions()
        .example('$0 completion bash >> ~/.bashrc', 'Complete stub-provider (and npx stub-provider) in bash')
        .example('$0 completion zsh >> ~/.zshrc', 'The same in zsh')
        .example('$0 completion fish > ~/.config/fish/completions/stub-provider.fish', 'The same in fish'),
    handler: (a: { shell?: unknown }) => {
      handlers.onCompletion(a.shell);
    },
  });
  return parser;
}

/** Where a command writes: the process's stdout and stderr, or a test's. */
export interface Streams {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  streams: Streams = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  // Whatever is quoted back from here on (a message, a log line, a result) has the key taken out.
  addSecretsOf(env);
  const cli: CliContext = { configOf, ...streams };
  let failure: unknown;
  /** The --log-format of a command that has one, once its flags were parsed (null: none given). */
  let logFormat: string | null | undefined;
  /** What yargs printed itself: --help and --version (with a parse callback it writes nothing and never exits). */
  let printed = '';
  try {
    const run = await chosen(() =>
      commandLineParser(argv, env, {
        onCompletion: (shell) => {
          streams.stdout.write(completionScript(shell));
        },
        columns: (streams.stdout as { columns?: number }).columns,
      }).parseAsync(argv, {}, (_err, _argv, output: string) => {
        printed = output;
      }),
    );
    if (run) {
      const f = run.given['log-format'];
      if (Object.hasOwn(run.command.options, 'log-format')) logFormat = typeof f === 'string' ? f : null;
      await run.command.handler(run.given, env, cli);
    }
  } catch (err) {
    failure = err;
  }
  if (failure === undefined) {
    if (printed !== '') streams.stdout.write(`${printed}\n`);
    return ExitCode.OK;
  }
  if (failure instanceof ResultExit) return failure.exitCode;
  if (failure instanceof CliUsageError) {
    streams.stderr.write(
      `stub-provider: ${escapeControl(redact(failure.message))}\nRun 'stub-provider --help' for usage.\n`,
    );
    return ExitCode.Usage;
  }
  const d = describeError(failure);
  if (jsonLogs(logFormat, streams.stderr)) {
    // Logs are JSON (docs/operator-guide.md, "Logs"): the error is one more record, so every line of stderr parses.
    createLogger({ format: 'json', level: 'error', destination: streams.stderr }).error(
      { code: d.code, exitCode: d.exitCode },
      d.message,
    );
    return d.exitCode;
  }
  // The message may quote Omni, a BMC or the command line: one line, control characters escaped (rule 13).
  streams.stderr.write(`stub-provider: ${escapeControl(redact(`${d.message} [${d.code}]`))}\n`);
  return d.exitCode;
}

/**
 * Whether the command's logs are JSON: its --log-format, or by default off a terminal (log.ts). Before its flags were
 * parsed (a usage error) there are no logs yet, and the error is a line of text.
 */
function jsonLogs(format: string | null | undefined, stderr: NodeJS.WritableStream): boolean {
  if (format === undefined) return false;
  return format === 'json' || (format === null && (stderr as { isTTY?: boolean }).isTTY !== true);
}

/**
 * The configuration `stub-provider <command> <args>` would run with, from the parser main() uses (the
 * environment as flags, strict flags, every check of the command's parse), without running it: the
 * demo runs its steps from command lines, and tests drive a command's code in this process so. A
 * command line that main() would refuse throws the error main() would report.
 */
export function configFrom<K extends CommandName>(
  command: K,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): ConfigOf<K> {
  return configOf(COMMANDS[command] as AnyCommand, args, env) as ConfigOf<K>;
}

/** configFrom by the command itself: what a running command receives (CliContext). */
function configOf<C>(command: Command<OptionTable, C>, args: readonly string[], env: NodeJS.ProcessEnv): C {
  const name = [command.command].flat()[0] ?? '';
  const ran = chosenSync(() =>
    commandLineParser([name, ...args], env, { onCompletion: () => undefined })
      .exitProcess(false)
      .parseSync(),
  );
  if (ran?.command !== command)
    throw new Error(
      `stub-provider ${[name, ...args].join(' ')} did not select the ${name} command (--help or --version?)`,
    );
  return command.parse(ran.given, env);
}
