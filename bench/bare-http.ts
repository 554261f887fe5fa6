// The ceiling of the machine itself for "one HTTP/1.1 request per call": a bare node:http server in
// a process of its own that waits the same latency and answers a small JSON body (no signature, no
// store, no codec), and an undici client in the benchmark's process keeping `concurrency` POSTs open.
// Whatever the stub and the sim do per call comes on top of this; if even this rate is below
// concurrency / latency, the round-trip floor is out of reach on this machine.
//
//   node dist/bench/bare-http.js --serve --latency-ms 5   (the server: prints its port, runs until stdin ends)

import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';

const ANSWER = JSON.stringify({
  resource: {
    metadata: { namespace: 'default', type: 'T', id: 'x', version: '3', finalizers: ['a', 'b'] },
    spec: { proto_spec: 'CAIQAQ==' },
  },
});

function serve(latencyMs: number): void {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(ANSWER) });
        res.end(ANSWER);
      }, latencyMs);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    process.stdout.write(`${JSON.stringify({ port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
  });
  process.stdin.resume();
  process.stdin.on('end', () => {
    const ru = process.resourceUsage();
    process.stdout.write(`${JSON.stringify({ cpu_s: (ru.userCPUTime + ru.systemCPUTime) / 1e6 })}\n`);
    process.exit(0);
  });
}

export interface BareHttpResult {
  calls_per_s: number;
  client_cpu_us_per_call: number;
  server_cpu_us_per_call: number;
}

/** Runs the bare server in a child process and keeps `concurrency` requests open for `ms`. */
export async function measureBareHttp(latencyMs: number, concurrency: number, ms: number): Promise<BareHttpResult> {
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), '--serve', '--latency-ms', String(latencyMs)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('bare-http server ended before it listened');
  const { port } = JSON.parse(first.value) as { port: number };
  const agent = new Agent({ connections: concurrency });
  const origin = `http://127.0.0.1:${port}`;
  // The first fifth of the time warms the JIT up and is not counted.
  const warm = ms / 5;
  let n = 0;
  let cpu0 = process.cpuUsage();
  const start = performance.now();
  let t0 = start;
  let counting = false;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async (_, w) => {
        while (performance.now() - start < ms) {
          if (!counting && performance.now() - start >= warm) {
            counting = true;
            n = 0;
            t0 = performance.now();
            cpu0 = process.cpuUsage();
          }
          const res = await request(`${origin}/api/cosi.resource.State/Get`, {
            method: 'POST',
            dispatcher: agent,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ namespace: 'default', type: 'T', id: `x${w}` }),
          });
          JSON.parse(await res.body.text());
          n++;
        }
      }),
    );
  } finally {
    await agent.close();
  }
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  child.stdin.end();
  const last = await lines.next();
  const server = last.done ? { cpu_s: Number.NaN } : (JSON.parse(last.value) as { cpu_s: number });
  return {
    calls_per_s: (n * 1000) / elapsed,
    client_cpu_us_per_call: (cpu.user + cpu.system) / n,
    // The server's whole life (start and warm-up included) over the calls counted: an upper bound.
    server_cpu_us_per_call: (server.cpu_s * 1e6) / n,
  };
}

if (process.argv.includes('--serve')) {
  const i = process.argv.indexOf('--latency-ms');
  serve(i > 0 ? Number(process.argv[i + 1]) : 5);
}
