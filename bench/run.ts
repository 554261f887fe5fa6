// `npm run bench -- --machines 100|1000|10000 [--requests M] [--latency-ms 5] [--concurrency 64]`
//
// Starts the simulated Omni in its own process (bench/sim-server.ts) with N stuck bare-metal machines
// and M stuck MachineRequests and a fixed latency per call, runs the stub to completion in another
// process (bench/stub-runner.ts), checks that everything was released, then does the same for the
// naive baseline (bench/naive.ts) on a sample, and prints ONE JSON object on stdout. Then, unless
// told otherwise, the same stub against a fresh sim with Omni 1.9's write budget (the `throttled` run)
// and against a fresh sim with the stub and the sim on different CPUs (the `pinned` run, taskset).
//
// The round-trip floor: every bare-metal machine needs 9 calls (2 Updates, 6 Destroys, 1 Update),
// every MachineRequest 5 (Get + Update of the status's phase, 2 Destroys, 1 Update), plus one List
// or Watch per type read; floor = calls x latency / concurrency.

import { spawn, spawnSync, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import yargs from 'yargs';
import { measureBareHttp } from './bare-http.js';
import { startLink, type Link } from './link.js';
import { COMPRESSION_POLICIES } from '../src/omni-client/transport/compression.js';
import { hideBin } from 'yargs/helpers';
import { probeTransport, type Probe } from './probe.js';

const here = dirname(fileURLToPath(import.meta.url));

const args = yargs(hideBin(process.argv))
  .strict()
  .option('machines', { type: 'number', default: 1000, describe: 'stuck bare-metal machines (N)' })
  .option('requests', { type: 'number', describe: 'stuck MachineRequests (M); default N/10' })
  .option('latency-ms', { type: 'number', default: 5, describe: 'latency the sim adds to every call' })
  .option('concurrency', { type: 'number', default: 64 })
  .option('naive-sample', {
    type: 'number',
    default: 100,
    describe: 'machines (and at most as many requests) the naive baseline releases',
  })
  .option('skip-naive', { type: 'boolean', default: false })
  .option('probe-ms', {
    type: 'number',
    default: 2000,
    describe: 'measure the loopback transport first: Gets at this concurrency for this long (0: skip)',
  })
  .option('mix-machines', {
    type: 'number',
    describe:
      "measure the stub's mix of signed calls without the stub (bench/probe.ts) on a sim of its own with this many " +
      "machines (and requests in the proportion M/N): the floor of its CPU per call (default: N, the run's; " +
      "fewer spread the process's own start over fewer calls; 0: skip)",
  })
  .option('cpu-rounds', {
    type: 'number',
    describe:
      "measure the stub's CPU per call against the mix probe's this many times, alternating: the main run, then " +
      'rounds of one more stub run (fresh sim) and one more probe; each round over the mean of the probes just ' +
      "before and after it, the target on the rounds' median (default 5 up to 20 000 machines, 1 above: a round " +
      'costs a run of each; 1: the main run only; not with --link-mbit)',
  })
  .option('bare-ms', {
    type: 'number',
    default: 5000,
    describe:
      'measure a bare node:http server and undici client (no Omni logic) at the same latency and concurrency for ' +
      'this long (0: skip)',
  })
  .option('sim-max-old-space-mb', {
    type: 'number',
    describe:
      "run the sim with node --max-old-space-size=<this>; default: Node's own up to 40 000 machines, 1 GiB per 10 " +
      '000 machines above (the sim holds the whole fleet and its history)',
  })
  .option('sim-node-flag', {
    type: 'string',
    array: true,
    default: [] as string[],
    describe:
      "more node flags for the sim's processes (repeatable), after its --max-semi-space-size=64 (a later one wins)",
  })
  .option('stub-max-old-space-mb', {
    type: 'number',
    describe: 'run the stub with node --max-old-space-size=<this> (what an operator can set through NODE_OPTIONS)',
  })
  .option('stub-node-flag', {
    type: 'string',
    array: true,
    default: [] as string[],
    describe: "more node flags for the stub's process (repeatable), e.g. --stub-node-flag=--max-semi-space-size=4",
  })
  .option('stub-arg', {
    type: 'string',
    array: true,
    default: [] as string[],
    describe:
      'more arguments for `stub-provider run` (repeatable, the CLI only), e.g. --stub-arg=--stream-idle-timeout=120s',
  })
  .option('cpu-prof-dir', {
    type: 'string',
    describe: 'write V8 CPU profiles of the sim and the stub (node --cpu-prof) into this directory',
  })
  .option('via', {
    choices: ['cli', 'lib'] as const,
    default: 'cli',
    describe:
      'cli: the built `stub-provider run` in its own process; lib: reconcile() in a runner process (counts ' +
      'signatures too)',
  })
  .option('link-mbit', {
    type: 'number',
    describe: 'put a slow link between the stub and the sim: this many megabits per second each way (bench/link.ts)',
  })
  .option('link-rtt-ms', { type: 'number', default: 0, describe: 'with --link-mbit: round-trip time the link adds' })
  .option('throttle-bytes-per-s', {
    type: 'number',
    default: 1_000_000,
    describe:
      "then a throttled run: a fresh sim with Omni 1.9's write budget for infra providers at this many bytes per " +
      'second (0: no throttled run)',
  })
  .option('throttle-burst', {
    type: 'number',
    describe: "the budget's burst in bytes (default: a tenth of a second of it, at least 16 KiB)",
  })
  .option('throttle-max-wait-ms', { type: 'number', describe: "the budget's maxWait (default Omni's, 30 s)" })
  .option('pin', {
    type: 'boolean',
    default: false,
    describe:
      'run the main run with the sim on CPU 0 and the stub on CPU 1 (taskset), as a stub that runs elsewhere than Omni',
  })
  .option('pinned-run', {
    type: 'boolean',
    default: true,
    describe:
      'then a pinned run: a fresh sim on CPU 0, the stub (and the transport probe) on CPU 1; --no-pinned-run skips ' +
      'it (so does --pin, or fewer than 2 CPUs)',
  })
  .option('cli', {
    type: 'string',
    describe:
      "run another checkout's built CLI (DIR/dist/src/main.js) under this benchmark (same sim, probe and usage " +
      'hook): a before and an after measured the same way',
  })
  .option('compression', {
    choices: COMPRESSION_POLICIES,
    describe:
      'which calls the stub asks gzip for (src/omni-client/transport/compression.ts; default: its own default, ' +
      'auto); --via lib only',
  })
  .parseSync();

const PER_MACHINE = 9;
const PER_REQUEST = 5;

interface Child {
  proc: ChildProcessByStdio<Writable, Readable, null>;
  lines: Interface;
  next(): Promise<Record<string, unknown>>;
}

/** The CPU of each role when pinned: the sim on 0, the stub, its runner and the probe on 1. */
const CPU = { sim: '0', stub: '1' } as const;

/** The command that runs node, on its role's CPU when `pin`. */
function nodeCommand(role: 'sim' | 'stub', argv: string[], pin: boolean): [string, string[]] {
  return pin ? ['taskset', ['-c', CPU[role], process.execPath, ...argv]] : [process.execPath, argv];
}

/** Every thread of this process (the probe's client) on CPU 1, or back on all CPUs (taskset -a -p). */
function pinSelf(pin: boolean): void {
  const r = spawnSync(
    'taskset',
    ['-a', '-p', '-c', pin ? CPU.stub : `0-${availableParallelism() - 1}`, String(process.pid)],
    { stdio: 'ignore' },
  );
  if (r.status !== 0)
    throw new Error(`taskset could not ${pin ? 'pin' : 'unpin'} the benchmark process (exit ${r.status})`);
}

function start(
  script: string,
  argv: string[],
  env: NodeJS.ProcessEnv = {},
  nodeFlags: string[] = [],
  pin = args.pin,
): Child {
  const [cmd, cmdArgs] = nodeCommand(
    script === 'sim-server.js' ? 'sim' : 'stub',
    [...nodeFlags, join(here, script), ...argv],
    pin,
  );
  const proc = spawn(cmd, cmdArgs, { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const lines = createInterface({ input: proc.stdout });
  const queue: string[] = [];
  const waiting: ((l: string | undefined) => void)[] = [];
  lines.on('line', (l) => {
    const w = waiting.shift();
    if (w) w(l);
    else queue.push(l);
  });
  lines.on('close', () => {
    for (const w of waiting.splice(0)) w(undefined);
  });
  const next = async () => {
    const l = queue.shift() ?? (await new Promise<string | undefined>((r) => waiting.push(r)));
    if (l === undefined) throw new Error(`${script} ended without an answer (exit ${proc.exitCode})`);
    return JSON.parse(l) as Record<string, unknown>;
  };
  return { proc, lines, next };
}

/**
 * The sim's young generation: its requests' garbage dies young, and collected from a young generation
 * of V8's default size much of it reached the old one, a heap of the whole fleet (3 GB at 100 000
 * machines) that a full collection then walks (docs/performance.md, "The simulated Omni at 100 000
 * machines"). A --sim-node-flag given later wins.
 */
const SIM_YOUNG_GENERATION_FLAG = '--max-semi-space-size=64';

async function startSim(
  machines: number,
  requests: number,
  extra: string[] = [],
  pin = args.pin,
): Promise<{ sim: Child; endpoint: string; key: string; resources: number }> {
  const heap = args['sim-max-old-space-mb'] ?? (machines > 40_000 ? Math.ceil(machines / 10_000) * 1024 : undefined);
  const flags = [
    ...(heap !== undefined ? [`--max-old-space-size=${heap}`] : []),
    SIM_YOUNG_GENERATION_FLAG,
    ...args['sim-node-flag'],
    ...profFlags(),
  ];
  const sim = start(
    'sim-server.js',
    [
      '--machines',
      String(machines),
      '--requests',
      String(requests),
      '--latency-ms',
      String(args['latency-ms']),
      ...extra,
    ],
    {},
    flags,
    pin,
  );
  const ready = await sim.next();
  return { sim, endpoint: String(ready['endpoint']), key: String(ready['key']), resources: Number(ready['resources']) };
}

/** Whether a child has ended, by its own exit or by a signal. */
function hasExited(proc: ChildProcess): boolean {
  return proc.exitCode !== null || proc.signalCode !== null;
}

/** A child's exit code once it has exited (null after a signal), at once if it already has. */
function exited(proc: ChildProcess): Promise<number | null> {
  if (hasExited(proc)) return Promise.resolve(proc.exitCode);
  return new Promise((r) => proc.once('exit', (code) => r(code)));
}

async function stopSim(sim: Child): Promise<Record<string, unknown>> {
  sim.proc.stdin.write('stats\n');
  const stats = await sim.next();
  sim.proc.stdin.end('quit\n');
  await exited(sim.proc);
  return stats;
}

async function runStub(endpoint: string, key: string, argv: string[]): Promise<Record<string, unknown>> {
  const c = start('stub-runner.js', argv, { BENCH_OMNI_ENDPOINT: endpoint, BENCH_OMNI_KEY: key }, heapFlag());
  const out = await c.next();
  await exited(c.proc);
  return out;
}

/** The stub the way option via says: the built CLI in its own process, or reconcile() in the runner's (--via lib). */
async function runTheStub(endpoint: string, key: string, C: number): Promise<Record<string, unknown>> {
  if (args.via === 'cli') return runCli(endpoint, key, C);
  const compression = args.compression ? ['--compression', args.compression] : [];
  return runStub(endpoint, key, ['--mode', 'stub', '--concurrency', String(C), ...compression]);
}

const heapFlag = (): string[] => [
  ...(args['stub-max-old-space-mb'] ? [`--max-old-space-size=${args['stub-max-old-space-mb']}`] : []),
  ...args['stub-node-flag'],
  ...profFlags(),
];
/** The node flags that preload the usage hook (usage-hook.ts: peak RSS and CPU written at exit). */
const usageHook = (): string[] => ['--import', pathToFileURL(join(here, 'usage-hook.js')).href];
const profFlags = (): string[] =>
  args['cpu-prof-dir'] ? ['--cpu-prof', `--cpu-prof-dir=${args['cpu-prof-dir']}`] : [];

/**
 * The product itself: `stub-provider run --yes` in its own process, its usage written at exit by
 * usage-hook. An exit other than 0 fails the benchmark, unless `partial` (the throttled run, where
 * today's stub may fail items: exit 5 with its report).
 */
async function runCli(
  endpoint: string,
  key: string,
  concurrency: number,
  partial = false,
  pin = args.pin,
): Promise<Record<string, unknown>> {
  const dir = await mkdtemp(join(tmpdir(), 'stub-bench-'));
  try {
    const usage = join(dir, 'usage.json');
    const argv = [
      ...heapFlag(),
      ...usageHook(),
      args.cli ? join(resolve(args.cli), 'dist', 'src', 'main.js') : join(here, '..', 'src', 'main.js'),
      'run',
      '--id',
      'bench',
      '--omni-api-endpoint',
      endpoint,
      '--yes',
      '--concurrency',
      String(concurrency),
      '--output',
      'json',
      '--log-level',
      'warn',
      '--log-format',
      'json',
      ...args['stub-arg'],
    ];
    const t0 = performance.now();
    const [cmd, cmdArgs] = nodeCommand('stub', argv, pin);
    const proc = spawn(cmd, cmdArgs, {
      stdio: ['ignore', 'pipe', partial ? 'pipe' : 'inherit'],
      env: { ...process.env, OMNI_SERVICE_ACCOUNT_KEY: key, BENCH_USAGE_FILE: usage },
    });
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    // A throttled run's warnings (one per failed item) are counted from the report, not printed; the
    // last of them are kept for an exit that is not a report.
    let errTail = '';
    proc.stderr?.on('data', (d: Buffer) => {
      errTail = (errTail + d.toString()).slice(-4000);
    });
    const code = await exited(proc);
    const wallMs = performance.now() - t0;
    if (code !== 0 && !(partial && code === 5))
      throw new Error(`stub-provider run exited ${code}${errTail ? `: ${errTail}` : ''}`);
    const report = JSON.parse(out) as {
      result: string;
      released: unknown[];
      failed?: { reason: string }[];
      deregistration: { status: string };
    };
    const failed = report.failed ?? [];
    return {
      ...(JSON.parse(await readFile(usage, 'utf8')) as Record<string, unknown>),
      wall_ms: wallMs,
      exit_code: code,
      outcomes: {
        result: report.result,
        released: report.released.length,
        failed: failed.length,
        deregistration: report.deregistration.status,
      },
      ...(failed.length > 0 ? { first_failure: failed[0]?.reason } : {}),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** What the mix probe measured: its process's CPU, the calls its sim served (by method), its wall time. */
interface MixProbe {
  machines: number;
  requests: number;
  cpuS: number;
  calls: Record<string, number>;
  wallMs: number;
}

/**
 * The mix probe (bench/probe.ts) on a sim of its own: the stub's signed calls without the stub, in a
 * process of its own started as the stub's is (bench/mix-client.ts): the same node flags and CPU,
 * the same usage hook.
 */
async function measureMix(N: number, M: number, C: number): Promise<MixProbe> {
  const machines = Math.min(N, args['mix-machines'] ?? N);
  const requests = N > 0 ? Math.round((machines * M) / N) : M;
  const s = await startSim(machines, requests);
  const dir = await mkdtemp(join(tmpdir(), 'stub-bench-mix-'));
  try {
    const usage = join(dir, 'usage.json');
    const c = start(
      'mix-client.js',
      ['--concurrency', String(C)],
      { BENCH_OMNI_ENDPOINT: s.endpoint, BENCH_OMNI_KEY: s.key, BENCH_USAGE_FILE: usage },
      [...heapFlag(), ...usageHook()],
    );
    const out = await c.next();
    const code = await exited(c.proc);
    if (code !== 0) throw new Error(`the mix probe exited ${code}`);
    const used = JSON.parse(await readFile(usage, 'utf8')) as { cpu_s: number };
    const stats = await stopSim(s.sim);
    return {
      machines,
      requests,
      cpuS: used.cpu_s,
      calls: stats['calls'] as Record<string, number>,
      wallMs: Number(out['wall_ms']),
    };
  } finally {
    // Not stopped yet (the probe failed first), and still there to answer: a sim killed by a signal
    // would never answer stopSim's stats.
    if (!hasExited(s.sim.proc)) await stopSim(s.sim);
    await rm(dir, { recursive: true, force: true });
  }
}

/** The first mix probe's figures, with the floor: the mean CPU per call of it and of `after`. */
function withFloor(before: MixProbe, after: MixProbe): MixProbe & { usPerCallRuns: number[]; usPerCall: number } {
  const usPerCallRuns = [before, after].map((m) => usPerCall(m.cpuS, m.calls));
  return { ...before, usPerCallRuns, usPerCall: (usPerCallRuns[0]! + usPerCallRuns[1]!) / 2 };
}

/** CPU per call of one process (its usage hook's figure) over the calls its sim served. */
const usPerCall = (cpuS: number, calls: unknown): number => (cpuS * 1e6) / Math.max(1, sum(calls));

/** One round of the CPU measurement: the stub's CPU per call over the mean of the probes around it. */
interface CpuRound {
  stubUs: number;
  probeUs: number;
  ratio: number;
}

const roundOf = (stubUs: number, probesAround: [number, number]): CpuRound => {
  const probeUs = (probesAround[0] + probesAround[1]) / 2;
  return { stubUs, probeUs, ratio: stubUs / probeUs };
};

/**
 * Rounds 2.. of the CPU measurement (option cpu-rounds): each one more stub run on a fresh sim (the
 * main run's arguments, no link), then one more mix probe. A round whose stub did not release
 * everything fails the benchmark: its figure would not be the same work's.
 */
async function moreCpuRounds(
  rounds: number,
  N: number,
  M: number,
  C: number,
  lastProbeUs: number,
): Promise<{ rounds: CpuRound[]; probeUs: number[] }> {
  const out: CpuRound[] = [];
  const probeUs: number[] = [];
  let before = lastProbeUs;
  for (let r = 2; r <= rounds; r++) {
    const s = await startSim(N, M);
    let stub: Record<string, unknown>;
    try {
      stub = await runTheStub(s.endpoint, s.key, C);
    } catch (e) {
      // The stub failed: its sim is stopped all the same (as measureMix's), unless it has ended already.
      if (!hasExited(s.sim.proc)) await stopSim(s.sim);
      throw e;
    }
    const stats = await stopSim(s.sim);
    const left = stats['left'] as { ourFinalizers: number; tearingDown: number };
    if (left.ourFinalizers !== 0 || left.tearingDown !== 0)
      throw new Error(
        `CPU round ${r}: the stub left ${left.ourFinalizers} finalizers of ours, ${left.tearingDown} tearing down`,
      );
    const probe = await measureMix(N, M, C);
    const after = usPerCall(probe.cpuS, probe.calls);
    out.push(roundOf(usPerCall(Number(stub['cpu_s']), stats['calls']), [before, after]));
    probeUs.push(after);
    before = after;
  }
  return { rounds: out, probeUs };
}

/** Option cpu-rounds, or its default: 5 rounds up to 20 000 machines (each costs a stub run and a probe), 1 above. */
const cpuRoundsOf = (N: number): number => args['cpu-rounds'] ?? (N <= 20_000 ? 5 : 1);

/** The middle value (the mean of the two middle ones for an even count). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The run against the transport probe's rate: the time its calls would take at that rate (the ceiling). */
function againstProbe(probe: Probe | undefined, calls: number, wallMs: number): Record<string, number> {
  if (probe === undefined) return {};
  const ceilingMs = (calls / probe.callsPerS) * 1000;
  return {
    transport_probe_calls_per_s: round(probe.callsPerS, 0),
    probe_client_cpu_us_per_call: round(probe.clientCpuUsPerCall, 1),
    transport_ceiling_ms: round(ceilingMs, 1),
    ratio_to_transport_ceiling: round(wallMs / ceilingMs, 3),
  };
}

const sum = (o: unknown) => Object.values((o ?? {}) as Record<string, number>).reduce((a, b) => a + b, 0);
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

async function main(): Promise<void> {
  const N = args.machines;
  const M = args.requests ?? Math.floor(N / 10);
  const L = args['latency-ms'];
  const C = args.concurrency;

  const load0 = Math.round((loadavg()[0] ?? 0) * 100) / 100;
  // First, while nothing else of the benchmark runs: what this machine allows at all.
  const bare = args['bare-ms'] > 0 ? await measureBareHttp(L, C, args['bare-ms']) : undefined;
  // The mix probe runs before the stub and again after it: this machine's speed drifts by a tenth or
  // more within a minute, and the floor is the mean of the two runs around the stub's.
  const mixing = (args['mix-machines'] ?? N) > 0;
  const mixBefore = mixing ? await measureMix(N, M, C) : undefined;
  const main = await startSim(N, M);
  if (args.compression && args.via !== 'lib')
    throw new Error('--compression needs --via lib (the CLI chooses by itself)');
  let probeRate: Probe | undefined;
  if (args['probe-ms'] > 0) {
    probeRate = await probeTransport(main.endpoint, main.key, C, args['probe-ms']);
    main.sim.proc.stdin.write('reset\n');
    await main.sim.next();
  }
  const link: Link | undefined = args['link-mbit']
    ? await startLink(main.endpoint, { mbit: args['link-mbit'], rttMs: args['link-rtt-ms'] })
    : undefined;
  const endpoint = link?.endpoint ?? main.endpoint;
  const stub = await runTheStub(endpoint, main.key, C);
  const linkStats = link?.stats();
  await link?.close();
  const simStats = await stopSim(main.sim);
  const mix = mixBefore && withFloor(mixBefore, await measureMix(N, M, C));
  // The stub's CPU per call against the probe's, round 1 the main run's; more rounds alternate a stub
  // run and a probe (option cpu-rounds): one round's ratio swings by a tenth or more on this machine.
  const firstRound =
    mix && roundOf(usPerCall(Number(stub['cpu_s']), simStats['calls']), [mix.usPerCallRuns[0]!, mix.usPerCallRuns[1]!]);
  const more =
    mix && !link && cpuRoundsOf(N) > 1
      ? await moreCpuRounds(cpuRoundsOf(N), N, M, C, mix.usPerCallRuns[1]!)
      : undefined;
  const cpuRounds = firstRound ? [firstRound, ...(more?.rounds ?? [])] : [];
  const served = simStats['calls'] as Record<string, number>;
  const left = simStats['left'] as { ourFinalizers: number; tearingDown: number; byType: Record<string, number> };

  // One List or Watch per type the stub reads (counted from what the server saw, not assumed).
  const floorCalls = N * PER_MACHINE + M * PER_REQUEST + Number(simStats['kinds_read']);
  const floorMs = (floorCalls * L) / C;
  const wallMs = Number(stub['wall_ms']);
  const totalCalls = sum(served);

  const result: Record<string, unknown> = {
    N,
    M,
    latency_ms: L,
    concurrency: C,
    stub: args.via === 'cli' ? 'stub-provider run --yes (built CLI, own process)' : 'reconcile() in a runner process',
    ...(args['stub-max-old-space-mb'] || args['stub-node-flag'].length > 0 ? { stub_node_flags: heapFlag() } : {}),
    machine: { cpus: availableParallelism(), loadavg_1m_before: load0 },
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
    // Time-averaged requests open at the sim while the stub ran (the floor assumes `concurrency`).
    mean_in_flight: simStats['mean_in_flight'],
    ...(bare
      ? {
          bare_http: {
            what:
              `a bare node:http server (own process, ${L} ms latency, no Omni logic) and an undici client, ${C} ` +
              `requests open, one request per call`,
            calls_per_s: round(bare.calls_per_s, 0),
            client_cpu_us_per_call: round(bare.client_cpu_us_per_call, 1),
            server_cpu_us_per_call: round(bare.server_cpu_us_per_call, 1),
            // The best ratio_to_floor any client making one HTTP request per call could reach here.
            ratio_to_floor: round(((C / L) * 1000) / bare.calls_per_s, 3),
          },
        }
      : {}),
    ...againstProbe(probeRate, totalCalls, wallMs),
    ...(mix
      ? {
          mix_probe: {
            what:
              `the stub's signed calls without the stub (bench/probe.ts): ${mix.machines} machines and ` +
              `${mix.requests} requests of a sim of its own released straight through the client, ${C} at once, ` +
              `one List per kind, no Watch; in a process of its own measured as the stub's (all its CPU, ` +
              `loading included, over the calls its sim served), once before the stub's run and once after`,
            calls_by_kind: mix.calls,
            wall_ms: round(mix.wallMs, 1),
            cpu_s: round(mix.cpuS, 3),
            // The run before the stub's and the one after it; the floor is their mean.
            client_cpu_us_per_call_runs: mix.usPerCallRuns.map((x) => round(x, 1)),
            client_cpu_us_per_call: round(mix.usPerCall, 1),
            // Option cpu-rounds: the probes of the rounds after the first, in order.
            ...(more ? { client_cpu_us_per_call_more_rounds: more.probeUs.map((x) => round(x, 1)) } : {}),
          },
          cpu_rounds: cpuRounds.map((r) => ({
            stub_us_per_call: round(r.stubUs, 1),
            probe_us_per_call: round(r.probeUs, 1),
            ratio: round(r.ratio, 3),
          })),
        }
      : {}),
    peak_rss_mb: round(Number(stub['peak_rss_mb']), 1),
    // process.memoryUsage() at the 50 ms sample of the highest RSS (the CLI only).
    ...(stub['at_peak_mb'] !== undefined ? { memory_at_peak_mb: stub['at_peak_mb'] } : {}),
    ...(stub['peak_heap_mb'] !== undefined ? { peak_heap_mb: round(Number(stub['peak_heap_mb']), 1) } : {}),
    cpu_s: round(Number(stub['cpu_s']), 3),
    cpu_us_per_request: round((Number(stub['cpu_s']) * 1e6) / Math.max(1, totalCalls), 1),
    ...(stub['sign_ops'] !== undefined ? { sign_ops: stub['sign_ops'], client_calls: stub['calls'] } : {}),
    stub_outcomes: stub['outcomes'],
    sim_process: simStats['sim'],
    ...(args.compression ? { compression: args.compression } : {}),
    ...(linkStats ? { link: { mbit: args['link-mbit'], rtt_ms: args['link-rtt-ms'], ...linkStats } } : {}),
  };

  const rate = args['throttle-bytes-per-s'];
  if (rate > 0) result['throttled'] = await throttledRun(N, M, C, rate, wallMs);
  if (args['pinned-run'] && !args.pin) result['pinned'] = await pinnedRun(N, M, C, floorCalls, floorMs);

  if (!args['skip-naive']) {
    const sn = Math.min(N, args['naive-sample']);
    const sr = Math.min(M, args['naive-sample']);
    const naiveSim = await startSim(sn, sr);
    const naive = await runStub(naiveSim.endpoint, naiveSim.key, [
      '--mode',
      'naive',
      '--machines',
      String(sn),
      '--requests',
      String(sr),
    ]);
    const naiveStats = await stopSim(naiveSim.sim);
    const nMs = Number(naive['machines_ms']);
    const rMs = Number(naive['requests_ms']);
    const scaled = (sn > 0 ? (nMs * N) / sn : 0) + (sr > 0 ? (rMs * M) / sr : 0);
    const naiveCalls = sum(naiveStats['calls']);
    result['naive'] = {
      method:
        `Go-library-like controllers: per finalizer Get then Update, per output Get then Destroy, one resource ` +
        `at a time, sequential; measured on ${sn} machines and ${sr} requests and scaled linearly to N=${N}, ` +
        `M=${M}`,
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

  // The targets (docs/performance.md, "Targets"): each met or not (null: not measured in this run),
  // with its figure and its limit.
  const th = result['throttled'] as Record<string, number | boolean | null> | undefined;
  const num = (k: string): number | undefined => (result[k] === undefined ? undefined : Number(result[k]));
  const target = (value: number | undefined, limit: number, what: string) => ({
    met: value === undefined ? null : value <= limit,
    value: value ?? null,
    limit,
    what,
  });
  // The floor of the stub's CPU per call: the mix probe's (the same calls), else the Get probe's.
  const getCpu = num('probe_client_cpu_us_per_call');
  const mixCpu = mix ? round(mix.usPerCall, 1) : undefined;
  const probeCpu = mixCpu ?? getCpu;
  const perCall = Number(result['cpu_us_per_request']);
  // With more than one round, the median of the rounds' ratios (each over the probes around it).
  const medianRatio = cpuRounds.length > 1 ? median(cpuRounds.map((r) => r.ratio)) : undefined;
  const cpuRatio = medianRatio ?? (probeCpu ? perCall / probeCpu : undefined);
  if (getCpu) result['cpu_over_get_probe'] = round(perCall / getCpu, 3);
  if (mixCpu) result['cpu_over_mix_probe'] = round(perCall / mixCpu, 3);
  if (medianRatio !== undefined) result['cpu_over_mix_probe_median'] = round(medianRatio, 3);
  result['targets'] = {
    peak_rss_le_200mb: target(num('peak_rss_mb'), 200, 'stub peak RSS, MB'),
    cpu_le_1_25x_probe_client: target(
      cpuRatio === undefined ? undefined : round(cpuRatio, 3),
      1.25,
      medianRatio !== undefined
        ? `stub CPU per call over the mix probe's (the stub's calls without the stub), the median of ` +
            `${cpuRounds.length} alternating rounds (cpu_rounds: ` +
            `${cpuRounds.map((r) => `${round(r.stubUs, 1)}/${round(r.probeUs, 1)} us`).join(', ')})`
        : `stub CPU per call (${perCall} us) over the probe client's per signed call ` +
            `(${probeCpu ?? '-'} us, ${mixCpu ? "the mix probe's: the stub's calls" : "the Get probe's"})`,
    ),
    calls_le_floor_plus_0_1pct: target(num('calls_over_floor_pct'), 0.1, 'calls over the floor, %'),
    ...(th
      ? {
          throttled_released_all: { met: th['released_all'] === true, what: 'throttled run: everything released' },
          throttled_zero_failed: target(Number(th['items_failed']), 0, 'throttled run: items failed'),
          throttled_wall_le_1_3_budget: target(Number(th['ratio_to_budget']), 1.3, 'throttled run: wall / budget'),
          throttled_deadline_overruns_le_5: target(
            Number(th['calls_over_deadline']),
            5,
            'throttled run: calls over their deadline',
          ),
        }
      : {}),
    wall_le_1_05_transport_ceiling: target(num('ratio_to_transport_ceiling'), 1.05, 'wall / signed-transport ceiling'),
    speedup_ge_20: {
      met: result['speedup_vs_naive'] === undefined ? null : Number(result['speedup_vs_naive']) >= 20,
      value: result['speedup_vs_naive'] ?? null,
      limit: 20,
      what: 'speed-up over the naive baseline (at least)',
    },
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

/**
 * The stub (the CLI) and a fresh sim on different CPUs, as a stub running elsewhere than Omni: the
 * main run's figures for that layout, with a transport probe made from CPU 1 too.
 */
async function pinnedRun(
  N: number,
  M: number,
  C: number,
  floorCalls: number,
  floorMs: number,
): Promise<Record<string, unknown>> {
  if (availableParallelism() < 2) return { skipped: `${availableParallelism()} CPU: nothing to pin apart` };
  const p = await startSim(N, M, [], true);
  let probeRate: Probe | undefined;
  if (args['probe-ms'] > 0) {
    pinSelf(true);
    try {
      probeRate = await probeTransport(p.endpoint, p.key, C, args['probe-ms']);
    } finally {
      pinSelf(false);
    }
    p.sim.proc.stdin.write('reset\n');
    await p.sim.next();
  }
  const stub = await runCli(p.endpoint, p.key, C, false, true);
  const stats = await stopSim(p.sim);
  const left = stats['left'] as { ourFinalizers: number; tearingDown: number };
  const wallMs = Number(stub['wall_ms']);
  const calls = sum(stats['calls']);
  return {
    what:
      `a fresh sim on CPU ${CPU.sim}, the stub (CLI) and the transport probe on CPU ${CPU.stub} (taskset); the ` +
      `same options`,
    released_all: left.ourFinalizers === 0 && left.tearingDown === 0,
    calls_total: calls,
    calls_over_floor_pct: round((100 * (calls - floorCalls)) / floorCalls, 2),
    wall_ms: round(wallMs, 1),
    ratio_to_floor: round(wallMs / floorMs, 3),
    ...againstProbe(probeRate, calls, wallMs),
    peak_rss_mb: round(Number(stub['peak_rss_mb']), 1),
    cpu_s: round(Number(stub['cpu_s']), 3),
    cpu_us_per_request: round((Number(stub['cpu_s']) * 1e6) / Math.max(1, calls), 1),
    stub_outcomes: stub['outcomes'],
    sim_process: stats['sim'],
  };
}

/**
 * The stub against a fresh sim whose infra-provider class has Omni 1.9's write budget: the bytes the
 * sim let through, the time they need at that rate, and what the stub made of the back-pressure.
 */
async function throttledRun(
  N: number,
  M: number,
  C: number,
  rate: number,
  unthrottledMs: number,
): Promise<Record<string, unknown>> {
  const burst = args['throttle-burst'] ?? Math.max(16 * 1024, Math.round(rate / 10));
  const maxWait = args['throttle-max-wait-ms'];
  const t = await startSim(N, M, [
    '--throttle-bytes-per-s',
    String(rate),
    '--throttle-burst',
    String(burst),
    ...(maxWait !== undefined ? ['--throttle-max-wait-ms', String(maxWait)] : []),
  ]);
  const stub = await runCli(t.endpoint, t.key, C, true);
  const stats = await stopSim(t.sim);
  const th = stats['throttle'] as {
    admitted: number;
    admittedBytes: number;
    waited: number;
    waitedMs: number;
    failedTimeout: number;
    failedOversize: number;
    abandoned: number;
  };
  const left = stats['left'] as { ourFinalizers: number; tearingDown: number };
  const wallMs = Number(stub['wall_ms']);
  const budgetMs = (th.admittedBytes / rate) * 1000;
  const outcomes = stub['outcomes'] as { failed: number };
  return {
    what:
      `a fresh sim with an infra-provider write budget of ${rate} bytes/s, burst ${burst}, maxWait ` +
      `${maxWait ?? 30_000} ms; the same stub and options`,
    bytes_per_s: rate,
    burst,
    max_wait_ms: maxWait ?? 30_000,
    released_all: left.ourFinalizers === 0 && left.tearingDown === 0,
    wall_ms: round(wallMs, 1),
    bytes_written: th.admittedBytes,
    writes: th.admitted,
    budget_ms: round(budgetMs, 1),
    ratio_to_budget: round(wallMs / Math.max(1, budgetMs), 3),
    // Against the slower of the budget and the unthrottled run: above 1 only when the throttle cost
    // time the stub would not have spent anyway (a budget faster than the stub cannot be the limit).
    ratio_to_budget_or_unthrottled: round(wallMs / Math.max(1, budgetMs, unthrottledMs), 3),
    writes_waited: th.waited,
    mean_wait_ms: round(th.waited > 0 ? th.waitedMs / th.waited : 0, 1),
    // Refused by the sim (DeadlineExceeded: the bytes not there within the deadline), plus writes
    // whose client gave up while they waited (its own deadline).
    deadline_exceeded: th.failedTimeout,
    abandoned_while_waiting: th.abandoned,
    calls_over_deadline: th.failedTimeout + th.abandoned,
    resource_exhausted: th.failedOversize,
    items_failed: outcomes.failed,
    stub_exit_code: stub['exit_code'],
    stub_outcomes: stub['outcomes'],
    ...(stub['first_failure'] !== undefined ? { first_failure: stub['first_failure'] } : {}),
    calls_total: sum(stats['calls']),
    peak_rss_mb: round(Number(stub['peak_rss_mb']), 1),
    cpu_s: round(Number(stub['cpu_s']), 3),
  };
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
