#!/usr/bin/env node
// Entry point of the `stub-provider` binary; everything else is in cli.ts so tests can call it.

import { hideBin } from 'yargs/helpers';
import { main } from './cli.js';
import { ExitCode } from './exit-codes.js';
import { tuneGc } from './gc-tuning.js';
import { escapeControl } from './omni-api/untrusted.js';

tuneGc();

main(hideBin(process.argv)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`stub-provider: internal error: ${escapeControl(String(err))}\n`);
    process.exitCode = ExitCode.Internal;
  },
);
