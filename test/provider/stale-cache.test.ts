// Decisions on fresh facts (docs/design.md rule 10): a reason the report gives from a kind's cache
// (what the run released "still exists") is read again by ID before it is reported. Test: a proxy
// whose Watch streams break right before every live event, so that the caches never see Omni
// destroy what the run released.

import { createServer, request } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { NS_INFRA_PROVIDER, T } from '../../src/omni-api/resource.js';
import { runIn } from '../helpers/cli-config.js';

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closing.splice(0)) await c();
});

/** A live event's line: an event type CREATED, UPDATED or DESTROYED (by name or number), alone or in a batch. */
const LIVE_EVENT = /"event_type":\s*"?(CREATED|UPDATED|DESTROYED|0|1|2)"?[,}]/;
const BATCH = /"event":\[\{/;
const NOT_LIVE = /"event_type":\s*"?(NOOP|BOOTSTRAPPED|3|5)"?/;

/** A loopback proxy in front of `upstream` that breaks each Watch answer right before a live event. */
async function watchBreakingProxy(upstream: string): Promise<{ endpoint: string; cuts: () => number }> {
  const up = new URL(upstream);
  let cuts = 0;
  const server: Server = createServer((req, res) => {
    const headers = { ...req.headers, host: up.host };
    delete headers['accept-encoding'];
    const watch = (req.url ?? '').endsWith('/Watch');
    const fwd = request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      if (!watch) return void ur.pipe(res);
      let buf = '';
      ur.setEncoding('utf8');
      ur.on('data', (chunk: string) => {
        buf += chunk;
        for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
          const line = buf.slice(0, i + 1);
          buf = buf.slice(i + 1);
          if (LIVE_EVENT.test(line) || (BATCH.test(line) && !NOT_LIVE.test(line))) {
            cuts++;
            ur.destroy();
            res.destroy();
            return;
          }
          res.write(line);
        }
      });
      ur.on('end', () => res.end());
      ur.on('error', () => res.destroy());
    });
    fwd.on('error', () => res.destroy());
    req.pipe(fwd);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  closing.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, cuts: () => cuts };
}

describe('a reason from a cache that stopped following Omni', () => {
  it('Watch streams that break on every event: what Omni destroyed is read again; deregisters', async () => {
    const sim: Sim = await createSim(generateScenario({ providerId: 'bm', machines: 2, omniVersion: '1.9.3' }));
    closing.push(() => sim.close());
    const proxy = await watchBreakingProxy(sim.endpoint);
    const rep = await runIn(sim, 'bm', ['--step-timeout', '2s'], { endpoint: proxy.endpoint });
    expect(proxy.cuts()).toBeGreaterThan(0);
    const left = sim.store
      .all()
      .filter((r) => r.metadata.namespace === NS_INFRA_PROVIDER && r.metadata.type === T.InfraMachine);
    expect(left).toEqual([]);
    expect(rep.deregistration.reasons.join('; ')).not.toMatch(/still exist/);
    expect(rep).toMatchObject({ exitCode: 0, result: 'done', deregistration: { status: 'deregistered' } });
  }, 120_000);
});
