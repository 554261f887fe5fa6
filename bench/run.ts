// `npm run bench -- --machines 100|1000|10000 [--requests M] [--latency-ms 5] [--concurrency 64]`
//
// Starts the simulated Omni in its own process (bench/sim-server.ts) with N stuck bare-metal machines
// and M stuck MachineRequests and a fixed latency per call, runs the stub to completion in another
// process (bench/stub-runner.ts), checks that everything was released, then does the same for the
// naive baseline (bench/naive.ts) on a sample, and prints ONE JSON object on stdout.
//
// The round-trip floor: every bare-metal machine needs 9 calls (2 Updates, 6 Destroys, 1 Update),
// every MachineRequest 5 (Get + Update of the status's phase, 2 Destroys, 1 Update), plus one List
// or Watch per type read; floor = calls x latency / concurrency.

import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';

const here = dirname(fileURLToPath(import.meta.url));

const args = yargs(hideBin(process.argv))
  .strict()
  .option('machines', { type: 'number', default: 1000, describe: 'stuck bare-metal machines (N)' })
  .option('requests', { type: 'number', describe: 'stuck MachineRequests (M); default N/10' })
  .option('latency-ms', { type: 'number', default: 5, describe: 'latency the sim adds to every call' })
  .option('concurrency', { type: 'number', default: 64 })
  .option('naive-sample', { type: 'number', default: 100, describe: 'machines (and at most as many requests) the naive baseline releases' })
  .option('skip-naive', { type: 'boolean', default: false })
  .parseSync();

const PER_MACHINE = 9;
const PER_REQUEST = 5;

interface Child {
  proc: ChildProcessByStdio<Writable, Readable, null>;
  lines: Interface;
  next(): Promise<Record<string, unknown>>;
}

function start(script: string, argv: string[], env: NodeJS.ProcessEnv = {}): Child {
  const proc = spawn(process.execPath, [join(here, script), ...argv], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const lines = createInterface({ input: proc.stdout });
  const queue: string[] = [];
  const waiting: ((l: string | undefined) => void)[] = [];
  lines.on('line', (l) => { const w = waiting.shift(); if (w) w(l); else queue.push(l); });
  lines.on('close', () => { for (const w of waiting.splice(0)) w(undefined); });
  const next = async () => {
    const l = queue.shift() ?? (await new Promise<string | undefined>((r) => waiting.push(r)));
    if (l === undefined) throw new Error(`${script} ended without an answer (exit ${proc.exitCode})`);
    return JSON.parse(l) as Record<string, unknown>;
  };
  return { proc, lines, next };
}

async function startSim(machines: number, requests: number): Promise<{ sim: Child; endpoint: string; key: string; resources: number }> {
  const sim = start('sim-server.js', ['--machines', String(machines), '--requests', String(requests), '--latency-ms', String(args['latency-ms'])]);
  const ready = await sim.next();
  return { sim, endpoint: String(ready['endpoint']), key: String(ready['key']), resources: Number(ready['resources']) };
}

async function stopSim(sim: Child): Promise<Record<string, unknown>> {
  sim.proc.stdin.write('stats\n');
  const stats = await sim.next();
  sim.proc.stdin.end('quit\n');
  await new Promise((r) => sim.proc.once('exit', r));
  return stats;
}

async function runStub(endpoint: string, key: string, argv: string[]): Promise<Record<string, unknown>> {
  const c = start('stub-runner.js', argv, { BENCH_OMNI_ENDPOINT: endpoint, BENCH_OMNI_KEY: key });
  const out = await c.next();
  await new Promise((r) => (c.proc.exitCode !== null ? r(undefined) : c.proc.once('exit', r)));
  return out;
}

const sum = (o: unknown) => Object.values((o ?? {}) as Record<string, number>).reduce((a, b) => a + b, 0);
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

async function main(): Promise<void> {
  const N = args.machines;
  const M = args.requests ?? Math.floor(N / 10);
  const L = args['latency-ms'];
  const C = args.concurrency;

  const main = await startSim(N, M);
  const stub = await runStub(main.endpoint, main.key, ['--mode', 'stub', '--concurrency', String(C)]);
  const simStats = await stopSim(main.sim);
  const served = simStats['calls'] as Record<string, number>;
  const left = simStats['left'] as { ourFinalizers: number; tearingDown: number; byType: Record<string, number> };

  // One List or Watch per type the stub reads (counted from what the server saw, not assumed).
  const readsPerType = (served['List'] ?? 0) + (served['Watch'] ?? 0);
  const floorCalls = N * PER_MACHINE + M * PER_REQUEST + readsPerType;
  const floorMs = (floorCalls * L) / C;
  const wallMs = Number(stub['wall_ms']);
  const totalCalls = sum(served);

  const result: Record<string, unknown> = {
    N, M, latency_ms: L, concurrency: C,
    released_all: left.ourFinalizers === 0 && left.tearingDown === 0,
    left_over: left.byType,
    calls_by_kind: served,
    calls_total: totalCalls,
    calls_floor: floorCalls,
    calls_per_item: round(totalCalls / Math.max(1, N + M), 3),
    calls_over_floor_pct: round((100 * (totalCalls - floorCalls)) / floorCalls, 2),
    wall_ms: round(wallMs, 1),
    floor_ms: round(floorMs, 1),
    ratio_to_floor: round(wallMs / floorMs, 3),
    peak_rss_mb: round(Number(stub['peak_rss_mb']), 1),
    peak_heap_mb: round(Number(stub['peak_heap_mb']), 1),
    cpu_s: round(Number(stub['cpu_s']), 3),
    cpu_us_per_request: round((Number(stub['cpu_s']) * 1e6) / Math.max(1, totalCalls), 1),
    sign_ops: stub['sign_ops'],
    client_calls: stub['calls'],
    stub_outcomes: stub['outcomes'],
    sim_process: simStats['sim'],
  };

  if (!args['skip-naive']) {
    const sn = Math.min(N, args['naive-sample']);
    const sr = Math.min(M, args['naive-sample']);
    const naiveSim = await startSim(sn, sr);
    const naive = await runStub(naiveSim.endpoint, naiveSim.key, ['--mode', 'naive', '--machines', String(sn), '--requests', String(sr)]);
    const naiveStats = await stopSim(naiveSim.sim);
    const nMs = Number(naive['machines_ms']);
    const rMs = Number(naive['requests_ms']);
    const scaled = (sn > 0 ? (nMs * N) / sn : 0) + (sr > 0 ? (rMs * M) / sr : 0);
    const naiveCalls = sum(naiveStats['calls']);
    result['naive'] = {
      method: `Go-library-like controllers: per finalizer Get then Update, per output Get then Destroy, one resource at a time, sequential; measured on ${sn} machines and ${sr} requests and scaled linearly to N=${N}, M=${M}`,
      sample_machines: sn,
      sample_requests: sr,
      sample_wall_ms: round(nMs + rMs, 1),
      sample_calls: naiveCalls,
      scaled_wall_ms: round(scaled, 0),
      scaled_calls: round((naiveCalls * (N + M)) / Math.max(1, sn + sr), 0),
      peak_rss_mb: round(Number(naive['peak_rss_mb']), 1),
      released_all_in_sample: (naiveStats['left'] as { tearingDown: number }).tearingDown === 0,
    };
    result['speedup_vs_naive'] = round(scaled / wallMs, 1);
  }

  result['targets'] = {
    ratio_to_floor_le_1_5: Number(result['ratio_to_floor']) <= 1.5,
    speedup_ge_20: result['speedup_vs_naive'] === undefined ? null : Number(result['speedup_vs_naive']) >= 20,
    peak_rss_lt_300mb: Number(result['peak_rss_mb']) < 300,
    calls_le_floor_plus_10pct: totalCalls <= floorCalls * 1.1,
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
