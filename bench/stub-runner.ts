// One measured run, in a process of its own so that its peak RSS and CPU time are the stub's alone:
//   --mode stub   the stub's reconcile (what `stub-provider run --yes` does after preflight)
//   --mode naive  the Go-library-like baseline (bench/naive.ts) on the first N machines / M requests
// Reads the endpoint and key from BENCH_OMNI_ENDPOINT / BENCH_OMNI_KEY (never logged) and prints one
// JSON line: wall time, calls by method as the client counted them, signatures made, CPU, peak RSS.

import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { createOmniClient } from '../src/omni-client/client.js';
import { COMPRESSION_POLICIES } from '../src/omni-client/transport/compression.js';
import { tuneGc } from '../src/gc-tuning.js';
import { omniFromEnv } from './omni-env.js';
import { createLogger, silentLogger } from '../src/log.js';
import { reconcile } from '../src/provider/run/reconcile.js';
import { VERSION } from '../src/version.js';
import { machineUuid } from '../src/omni-sim/scenario/generate.js';
import { naiveReleaseMachine, naiveReleaseRequest } from './naive.js';

const args = yargs(hideBin(process.argv))
  .strict()
  .option('mode', { choices: ['stub', 'naive'] as const, demandOption: true })
  .option('provider-id', { type: 'string', default: 'bench' })
  .option('concurrency', { type: 'number', default: 64 })
  .option('machines', { type: 'number', default: 0, describe: 'naive: how many machines to release' })
  .option('requests', { type: 'number', default: 0, describe: 'naive: how many requests to release' })
  .option('log-level', { type: 'string', describe: 'log the stub to stderr (JSON) at this level' })
  .option('compression', {
    choices: COMPRESSION_POLICIES,
    describe: "which calls ask gzip (default: the client's, auto)",
  })
  .parseSync();

// The same V8 setting as the binary (src/main.ts), so that the lib variant measures what ships.
tuneGc();

async function main(): Promise<void> {
  const { endpoint, key } = omniFromEnv();
  let peakHeap = 0;
  const sampler = setInterval(() => {
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  }, 100);
  const logger = args['log-level'] ? createLogger({ level: args['log-level'], format: 'json' }) : silentLogger();
  const client = await createOmniClient({
    endpoint,
    key,
    logger,
    concurrency: args.mode === 'naive' ? 1 : args.concurrency,
    timeoutMs: 120_000,
    ...(args.compression ? { gzip: args.compression } : {}),
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const out: Record<string, unknown> = {};
  if (args.mode === 'stub') {
    const res = await reconcile(
      { state: client.state, logger, version: VERSION },
      {
        providerId: args['provider-id'],
        machines: [],
        profile: 'auto',
        stateTypes: [],
        deregister: true,
        wait: false,
        timeoutMs: 600_000,
        concurrency: args.concurrency,
      },
    );
    const byStatus: Record<string, number> = {};
    for (const o of res.outcomes) byStatus[`${o.kind}:${o.status}`] = (byStatus[`${o.kind}:${o.status}`] ?? 0) + 1;
    Object.assign(out, { outcomes: byStatus, deregistered: res.deregistered, passes: res.passes });
  } else {
    const tm = performance.now();
    for (let i = 0; i < args.machines; i++)
      await naiveReleaseMachine(client.state, args['provider-id'], machineUuid(i));
    const machinesMs = performance.now() - tm;
    const tr = performance.now();
    for (let i = 0; i < args.requests; i++)
      await naiveReleaseRequest(client.state, args['provider-id'], `workers-${i.toString(36).padStart(6, '0')}`);
    Object.assign(out, { machines_ms: machinesMs, requests_ms: performance.now() - tr });
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const stats = client.stats();
  await client.close();
  clearInterval(sampler);
  const ru = process.resourceUsage();
  process.stdout.write(
    `${JSON.stringify({
      ...out,
      wall_ms: wallMs,
      calls: stats.callsByMethod,
      sign_ops: stats.signOps,
      cpu_s: (cpu.user + cpu.system) / 1e6,
      peak_rss_mb: ru.maxRSS / 1024,
      peak_heap_mb: peakHeap / 2 ** 20,
    })}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`stub-runner: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
