// The CLI shell: parse, run the command, map errors to exit codes. Commands live in src/commands/.

import yargs from 'yargs';
import { commands } from './commands/index.js';
import { describeError, ExitCode, ResultExit } from './exit-codes.js';
import { escapeControl } from './untrusted.js';
import { VERSION } from './version.js';

export async function main(argv: string[]): Promise<number> {
  let failure: unknown;
  const parser = yargs(argv)
    .scriptName('stub-provider')
    .env('STUB_PROVIDER')
    .strict()
    .version(VERSION)
    .help()
    .alias('h', 'help')
    .wrap(Math.min(110, process.stdout.columns || 110))
    // Throw, not record: a fail handler that returns lets yargs run the command's handler anyway, so
    // an unknown or mistyped flag (say --machines for --machine) would be ignored, not refused.
    .fail((msg, err) => {
      throw err ?? new UsageErrorMessage(msg);
    });
  for (const c of commands) parser.command(c);
  try {
    await parser.parseAsync();
  } catch (err) {
    failure = err;
  }
  if (failure === undefined) return process.exitCode === undefined ? ExitCode.OK : Number(process.exitCode);
  if (failure instanceof ResultExit) return failure.exitCode;
  if (failure instanceof UsageErrorMessage) {
    process.stderr.write(`stub-provider: ${escapeControl(failure.message)}\nRun 'stub-provider --help' for usage.\n`);
    return ExitCode.Usage;
  }
  const d = describeError(failure);
  // The message may quote Omni, a BMC or the command line: one line, control characters escaped (rule 13).
  process.stderr.write(`stub-provider: ${escapeControl(`${d.message} [${d.code}]`)}\n`);
  return d.exitCode;
}

class UsageErrorMessage extends Error {}
