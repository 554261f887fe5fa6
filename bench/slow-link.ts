// `node dist/bench/slow-link.js --machines 10000 --mbit 1 --rtt-ms 40 [--command plan|run]`
//
// The stub over a slow link (docs/performance.md, "A slow link"): the benchmark's simulated Omni in
// its own process (sim-server.ts, N stuck machines and N/10 requests), a shaped link in front of it
// (link.ts: X megabits per second each way, R ms of round trip), and the built CLI's `plan` (or
// `run --yes`) through the link, as an operator far from Omni runs it. Prints one JSON object: the
// exit code, the wall time, the bytes each way, the CLI's last error line when it failed, and the
// sim's view afterwards (for `run`: everything released or not).
// `--cli DIR` runs another checkout's built CLI (dist/src/main.js), `--sim DIR` its sim: the same
// measurement for a "before".

import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { startLink } from './link.js';

const here = dirname(fileURLToPath(import.meta.url));

const args = yargs(hideBin(process.argv))
  .strict()
  .option('machines', { type: 'number', default: 10_000 })
  .option('requests', { type: 'number', describe: 'default N/10' })
  .option('mbit', { type: 'number', default: 1, describe: 'megabits per second each way' })
  .option('rtt-ms', { type: 'number', default: 40 })
  .option('latency-ms', { type: 'number', default: 5, describe: 'latency the sim adds to every call' })
  .option('command', { choices: ['plan', 'run'] as const, default: 'plan' })
  .option('concurrency', { type: 'number', default: 64 })
  .option('limit-s', { type: 'number', default: 1_800, describe: 'the CLI is stopped (SIGTERM) after this long' })
  .option('cli', { type: 'string', describe: "a checkout whose dist/src/main.js runs (default: this one's)" })
  .option('sim', { type: 'string', describe: "a checkout whose dist/bench/sim-server.js serves (default: this one's)" })
  .option('extra', { type: 'string', array: true, default: [] as string[], describe: 'more flags for the CLI' })
  .parseSync();

interface Line {
  [k: string]: unknown;
}

async function main(): Promise<void> {
  const N = args.machines;
  const M = args.requests ?? Math.floor(N / 10);
  const sim = spawn(
    process.execPath,
    [
      ...(N > 40_000 ? [`--max-old-space-size=${Math.ceil(N / 10_000) * 1024}`] : []),
      args.sim ? join(resolve(args.sim), 'dist/bench/sim-server.js') : join(here, 'sim-server.js'),
      '--machines',
      String(N),
      '--requests',
      String(M),
      '--latency-ms',
      String(args['latency-ms']),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: sim.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<Line> => {
    const l = await lines.next();
    if (l.done) throw new Error(`sim-server ended (exit ${sim.exitCode})`);
    return JSON.parse(l.value) as Line;
  };
  const ready = await next();
  const link = await startLink(String(ready['endpoint']), { mbit: args.mbit, rttMs: args['rtt-ms'] });
  const main = join(args.cli ? resolve(args.cli) : join(here, '..'), args.cli ? 'dist/src/main.js' : 'src/main.js');
  const cmd = args.command === 'plan' ? ['plan'] : ['run', '--yes'];
  const argv = [
    main,
    ...cmd,
    '--id',
    'bench',
    '--omni-api-endpoint',
    link.endpoint,
    '--concurrency',
    String(args.concurrency),
    '--output',
    'json',
    '--log-level',
    'warn',
    '--log-format',
    'json',
    ...args.extra,
  ];
  const t0 = performance.now();
  const cli = spawn(process.execPath, argv, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, OMNI_SERVICE_ACCOUNT_KEY: String(ready['key']) },
  });
  let out = '';
  let err = '';
  cli.stdout.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-1_000_000)));
  cli.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-20_000)));
  const killer = setTimeout(() => cli.kill('SIGTERM'), args['limit-s'] * 1000);
  const code = await new Promise<number | null>((r) => cli.on('exit', (c) => r(c)));
  clearTimeout(killer);
  const wallMs = performance.now() - t0;
  const bytes = link.stats();
  await link.close();
  sim.stdin.write('stats\n');
  const stats = await next();
  sim.stdin.end('quit\n');
  let result: Line | undefined;
  try {
    result = JSON.parse(out) as Line;
  } catch {
    result = undefined;
  }
  const left = stats['left'] as { ourFinalizers: number; tearingDown: number };
  const errLines = err.trim().split('\n').filter(Boolean);
  process.stdout.write(
    `${JSON.stringify(
      {
        command: args.command,
        N,
        M,
        mbit: args.mbit,
        rtt_ms: args['rtt-ms'],
        exit_code: code,
        wall_ms: Math.round(wallMs),
        down_bytes: bytes.down_bytes,
        up_bytes: bytes.up_bytes,
        calls: stats['calls'],
        ...(args.command === 'run' ? { released_all: left.ourFinalizers === 0 && left.tearingDown === 0 } : {}),
        ...(result ? { result: result['result'], error: result['error'] } : {}),
        ...(code !== 0 && code !== 10 ? { last_stderr: errLines.slice(-3) } : {}),
      },
      null,
      2,
    )}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`slow-link: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
