// The mix probe's client (bench/probe.ts, probeMix) in a process of its own, started by the benchmark
// the way it starts the stub: the same node flags, the same usage hook (bench/usage-hook.ts, which
// writes the whole process's CPU at exit), and the same V8 settings as the binary (src/gc-tuning.ts).
// Its CPU per call is then measured as the stub's is: everything the process spent, loading the code
// and the JITs warming up included, over the calls its sim served. Measured inside the benchmark's
// own process after a warm-up that was not counted, the floor moved with whatever that process had
// run before (the bare HTTP probe made it a fifth lower), while the stub's figure always carried its
// own start (docs/performance.md, "Issue 27, fourth pass").
//
// Reads the endpoint and key from BENCH_OMNI_ENDPOINT / BENCH_OMNI_KEY (never logged); prints one
// JSON line: its wall time.

import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { tuneGc } from '../src/gc-tuning.js';
import { omniFromEnv } from './omni-env.js';
import { probeMix } from './probe.js';

const args = yargs(hideBin(process.argv))
  .strict()
  .option('provider-id', { type: 'string', default: 'bench' })
  .option('concurrency', { type: 'number', default: 64 })
  .parseSync();

tuneGc();

async function main(): Promise<void> {
  const { endpoint, key } = omniFromEnv();
  const t0 = performance.now();
  await probeMix(endpoint, key, args.concurrency, args['provider-id']);
  process.stdout.write(`${JSON.stringify({ wall_ms: performance.now() - t0 })}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`mix probe: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
