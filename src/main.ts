#!/usr/bin/env node
// Entry point of the `stub-provider` binary: only what must come before anything else loads (loading
// the CLI takes most of a second). A Node too old for the dependencies gets a sentence and exit 2
// instead of a SyntaxError from one of them; SIGINT and SIGTERM are recorded from here on
// (early-signal.ts), so a signal while loading still ends with a result. Then start.ts. Plain syntax
// only, and no import but early-signal.ts (which imports nothing), so that an old Node gets this far.

import { installEarlySignals } from './early-signal.js';

/** package.json "engines" (yargs 18's dependencies use syntax of Node 20.19). */
const MIN_NODE = [20, 19];

const running = process.versions.node;
const [major, minor] = running.split('.').map(Number);
if (!(major! > MIN_NODE[0]! || (major === MIN_NODE[0] && minor! >= MIN_NODE[1]!))) {
  process.stderr.write(`stub-provider needs Node.js ${MIN_NODE.join('.')} or later (this is ${running})\n`);
  process.exit(2);
}
installEarlySignals(process);
import('./start.js').then(
  (m) => m.start(),
  (err: unknown) => {
    process.stderr.write(`stub-provider: internal error while loading: ${String(err)}\n`);
    process.exitCode = 1;
  },
);
