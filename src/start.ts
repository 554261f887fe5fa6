// The process around the CLI, once main.ts has checked Node's version and recorded signals: the GC
// setting, the command, its exit code; and the backstop that makes exit 0 without a result
// impossible: a command whose promise is still open when nothing is left for the event loop to do
// (a wait nobody will end) is an internal error (a signal no command took: early-signal.ts).

import { hideBin } from 'yargs/helpers';
import { main } from './cli.js';
import { endCommand } from './early-signal.js';
import { ExitCode } from './exit-codes.js';
import { tuneGc } from './gc-tuning.js';
import { escapeControl } from './omni-api/untrusted.js';
import { redact } from './redact.js';

export function start(): void {
  tuneGc();
  let settled = false;
  // Only while the command runs: the event loop emptied without settling it, so it never will.
  const stuck = () => {
    if (settled) return;
    settled = true;
    process.stderr.write('stub-provider: internal error: the command stopped with nothing left to wait for\n');
    process.exitCode = ExitCode.Internal;
  };
  process.on('beforeExit', stuck);
  main(hideBin(process.argv)).then(
    (code) => {
      settled = true;
      endCommand();
      process.exitCode = code;
    },
    (err: unknown) => {
      settled = true;
      endCommand();
      process.stderr.write(`stub-provider: internal error: ${escapeControl(redact(String(err)))}\n`);
      process.exitCode = ExitCode.Internal;
    },
  );
}
