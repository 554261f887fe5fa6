// The benchmark's simulated Omni, in a process of its own so that the stub's CPU and memory are
// measured apart from the server's. Builds the scenario in code (src/omni-sim/scenario/generate.ts), serves it
// on 127.0.0.1:0 with the requested latency, prints one ready line (JSON: endpoint, key) on stdout,
// then answers line commands on stdin:
//   stats  -> one JSON line: calls served by method, the kinds listed or watched, what is left of
//             the provider, the sim's CPU/RSS, the write budget's counters when it is on
//   reset  -> forgets the calls counted so far (after the transport probe); answers {"reset":true}
//   quit   -> closes and exits (so does the end of stdin)
// The key goes to the parent over the pipe only; it is never logged.
// It runs with V8's own heap settings, not the binary's (src/gc-tuning.ts): those keep a heap of
// decisions small, while the sim holds the whole fleet, a heap that grows with it; held to half its
// live size between full collections, a 100 000-machine sim spent half its CPU collecting
// (docs/performance.md, "The simulated Omni at 100 000 machines"). run.ts starts it with a larger
// young generation (a start-up flag, which the process cannot set for itself).

import { createInterface } from 'node:readline';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import type { Resource } from '../src/omni-api/resource.js';
import diagnostics from 'node:diagnostics_channel';
import type { StateApi } from '../src/omni-sim/api.js';
import { createAccessApi } from '../src/omni-sim/access/access.js';
import { generateScenario } from '../src/omni-sim/scenario/generate.js';
import { createSim } from '../src/omni-sim/index.js';

const args = yargs(hideBin(process.argv))
  .strict()
  .option('machines', { type: 'number', demandOption: true })
  .option('requests', { type: 'number', default: 0 })
  .option('latency-ms', { type: 'number', default: 5 })
  .option('provider-id', { type: 'string', default: 'bench' })
  .option('throttle-bytes-per-s', {
    type: 'number',
    default: 0,
    describe: "Omni 1.9's write budget for the infra-provider class (0: off)",
  })
  .option('throttle-burst', { type: 'number', default: 0 })
  .option('throttle-max-wait-ms', { type: 'number' })
  .parseSync();

/**
 * Counts every call the gateway hands to the access layer (after authentication), by method; a write
 * the write budget made wait is handed over again after the wait, and counted once.
 */
function counting(
  inner: StateApi,
  calls: Record<string, number>,
  kinds: Set<string>,
  resending: () => boolean,
): StateApi {
  const n = (m: string) => {
    if (!resending()) calls[m] = (calls[m] ?? 0) + 1;
  };
  return {
    get: (w, p) => (n('Get'), inner.get(w, p)),
    list: (w, ns, t, q) => (n('List'), kinds.add(`${ns}/${t}`), inner.list(w, ns, t, q)),
    create: (w, r, o) => (n('Create'), inner.create(w, r, o)),
    update: (w, r, o, ph) => (n('Update'), inner.update(w, r, o, ph)),
    destroy: (w, p, o) => (n('Destroy'), inner.destroy(w, p, o)),
    teardown: (w, p, o) => (n('Teardown'), inner.teardown(w, p, o)),
    teardownAndDestroy: (w, p, o, s) => (n('TeardownAndDestroy'), inner.teardownAndDestroy(w, p, o, s)),
    watch: (w, p, s) => (n('Watch'), kinds.add(`${p.namespace}/${p.type}`), inner.watch(w, p, s)),
    view: (p) => inner.view(p), // the sim's own validations, not a call
  };
}

function leftOf(all: Resource[], id: string) {
  const byType: Record<string, number> = {};
  let ourFinalizers = 0;
  let tearingDown = 0;
  for (const r of all) {
    const t = r.metadata.type.split('.')[0] ?? r.metadata.type;
    byType[t] = (byType[t] ?? 0) + 1;
    ourFinalizers += r.metadata.finalizers.filter((f) => f.startsWith(`${id}.`)).length;
    if (r.metadata.phase === 'tearingDown') tearingDown++;
  }
  return { resources: all.length, byType, ourFinalizers, tearingDown };
}

/**
 * Requests the gateway holds at once, averaged over time (from the first request after a reset to the
 * stats command): how well the client keeps its concurrency busy. Streams (List, Watch) count while open.
 */
class InFlight {
  private now = 0;
  private area = 0;
  private since = 0;
  private last = 0;
  constructor() {
    diagnostics.subscribe('http.server.request.start', () => this.step(+1));
    diagnostics.subscribe('http.server.response.finish', () => this.step(-1));
  }
  private step(d: number): void {
    const t = performance.now();
    if (this.since === 0) this.since = t;
    else this.area += this.now * (t - this.last);
    this.last = t;
    this.now += d;
  }
  mean(): number {
    const span = this.last - this.since;
    return span > 0 ? Math.round((this.area / span) * 10) / 10 : 0;
  }
  reset(): void {
    this.area = 0;
    this.since = 0;
  }
}

async function main(): Promise<void> {
  const inFlight = new InFlight();
  const throttle =
    args['throttle-bytes-per-s'] > 0
      ? {
          infraProvider: { bytesPerSecond: args['throttle-bytes-per-s'], burst: args['throttle-burst'] },
          ...(args['throttle-max-wait-ms'] !== undefined ? { maxWaitMs: args['throttle-max-wait-ms'] } : {}),
        }
      : undefined;
  const scenario = generateScenario({
    providerId: args['provider-id'],
    machines: args.machines,
    requests: args.requests,
    faults: { latencyMs: args['latency-ms'], ...(throttle ? { throttle } : {}) },
  });
  const calls: Record<string, number> = {};
  const kinds = new Set<string>();
  let resending = (): boolean => false;
  const sim = await createSim(scenario, {
    access: (ctx) =>
      counting(createAccessApi(ctx.store, { version: ctx.omniVersion }), calls, kinds, () => resending()),
  });
  resending = () => sim.faults.throttle?.resending() ?? false;
  await sim.controllers?.idle();
  const key = sim.keys[`infra-provider:${args['provider-id']}`];
  process.stdout.write(
    `${JSON.stringify({ ready: true, endpoint: sim.endpoint, key, resources: sim.store.all().length })}\n`,
  );

  const rl = createInterface({ input: process.stdin });
  const quit = async () => {
    rl.close();
    await sim.close();
    process.exit(0);
  };
  rl.on('line', (line) => {
    const cmd = line.trim();
    if (cmd === 'stats') {
      void sim.controllers?.idle().then(() => {
        const ru = process.resourceUsage();
        process.stdout.write(
          `${JSON.stringify({
            calls: { ...calls },
            kinds_read: kinds.size,
            mean_in_flight: inFlight.mean(),
            left: leftOf(sim.store.all(), args['provider-id']),
            sim: { cpu_s: (ru.userCPUTime + ru.systemCPUTime) / 1e6, peak_rss_mb: ru.maxRSS / 1024 },
            ...(sim.faults.throttle ? { throttle: sim.faults.throttle.stats().infraProvider } : {}),
          })}\n`,
        );
      });
    } else if (cmd === 'reset') {
      for (const k of Object.keys(calls)) delete calls[k];
      kinds.clear();
      inFlight.reset();
      process.stdout.write(`${JSON.stringify({ reset: true })}\n`);
    } else if (cmd === 'quit') void quit();
  });
  rl.on('close', () => void quit());
}

main().catch((err: unknown) => {
  process.stderr.write(`sim-server: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
