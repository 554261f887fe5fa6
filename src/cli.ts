// The CLI shell: parse, run the command, map errors to exit codes. Commands live in src/commands/;
// the environment binding and the "did you mean" checks in cli-args.ts.

import yargs from 'yargs';
import { applyEnvironment, checkWords, CliUsageError, unknownFlagsMessage } from './cli-args.js';
import type { KnownOptions } from './cli-args.js';
import { allFlags, commands, globalOptions } from './commands/index.js';
import { describeError, ExitCode, ResultExit } from './exit-codes.js';
import { escapeControl } from './untrusted.js';
import { VERSION } from './version.js';

const COMPLETION = 'completion';

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let failure: unknown;
  const names = [...commands.flatMap((c) => [c.command].flat()).filter((n): n is string => typeof n === 'string' && n !== '$0').map((n) => n.split(/\s+/)[0]!), COMPLETION];
  const flags = allFlags();
  /** The command yargs is running, and its options, for the messages of the fail handler. */
  let current: { command: string | undefined; options: KnownOptions } | undefined;
  const parser = yargs(argv)
    .scriptName('stub-provider')
    // STUB_PROVIDER_<FLAG> is bound by applyEnvironment (below), not by yargs' .env(): yargs takes
    // STUB_PROVIDER_NO_DEREGISTER for a flag named no-deregister, and an unknown variable for an
    // unknown flag ("Unknown argument: foo") without saying that it came from the environment.
    .strict()
    .version(VERSION)
    .help()
    .alias('h', 'help')
    .options(globalOptions)
    .completion(COMPLETION, 'Print a completion script for bash or zsh: stub-provider completion >> ~/.bashrc')
    .wrap(Math.min(110, process.stdout.columns || 110))
    // Before validation, so that a stray word is named before "Missing required argument", and the
    // environment's values are checked like the command line's. (@types/yargs 17 knows neither the
    // second argument nor getOptions, which yargs 18 has.)
    .middleware(((a: { _?: unknown[] }, y: { getOptions(): unknown }) => {
      const options = y.getOptions() as KnownOptions;
      const words = (a._ ?? []).map(String);
      current = { command: names.includes(words[0] ?? '') ? words[0] : 'run', options };
      checkWords(words, names);
      applyEnvironment(a as Record<string, unknown>, options, argv, env, flags);
    }) as never, true)
    // Throw, not record: a fail handler that returns lets yargs run the command's handler anyway, so
    // an unknown or mistyped flag (say --machines for --machine) would be ignored, not refused.
    .fail((msg, err) => {
      if (err) throw err;
      throw new CliUsageError(unknownFlagsMessage(msg, current?.options, current?.command, flags) ?? msg);
    });
  for (const c of commands) parser.command(c);
  try {
    await parser.parseAsync();
  } catch (err) {
    failure = err;
  }
  if (failure === undefined) return process.exitCode === undefined ? ExitCode.OK : Number(process.exitCode);
  if (failure instanceof ResultExit) return failure.exitCode;
  if (failure instanceof CliUsageError) {
    process.stderr.write(`stub-provider: ${escapeControl(failure.message)}\nRun 'stub-provider --help' for usage.\n`);
    return ExitCode.Usage;
  }
  const d = describeError(failure);
  // The message may quote Omni, a BMC or the command line: one line, control characters escaped (rule 13).
  process.stderr.write(`stub-provider: ${escapeControl(`${d.message} [${d.code}]`)}\n`);
  return d.exitCode;
}
