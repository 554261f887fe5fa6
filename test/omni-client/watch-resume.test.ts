// Resuming watches where Omni puts its bookmarks (docs/omni-behaviour.md, "Watches"): bootstrap events carry none, the
// BOOTSTRAPPED marker and live events do, and Omni's etcd refuses a compacted revision only after the
// watch is established (an ERRORED event first). A consumer of GatewayState.watchKind must see every
// change once: nothing lost, nothing twice, a reset only when it has to rebuild.

import { request as httpRequest, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import { newMetadata, type Resource } from '../../src/omni-api/resource.js';
import { WatchErroredError } from '../../src/omni-api/errors.js';
import type { WatchEvent } from '../../src/omni-api/state.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { ProviderCache } from '../../src/provider/read/cache.js';
import { LineWriter, res, startFakeGateway, wireResource, type FakeGateway } from '../helpers/fake-gateway.js';
import { startTamperProxy, type TamperProxy, type TamperRequest } from '../helpers/tamper-proxy.js';

const NS = 'infra-provider';
const TYPE = 'MachineRequests.omni.sidero.dev';
const rev = (n: number) => Buffer.from([0, 0, 0, 0, 0, 0, 0, n]).toString('base64');
const COMPACTED = 'etcdserver: mvcc: required revision has been compacted';

let key: GeneratedKey;

beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});

describe('against a scripted gateway: an ERRORED event as the first answer to a resumed watch', () => {
  let gw: FakeGateway;
  let client: OmniClient;
  beforeEach(async () => {
    gw = await startFakeGateway();
    client = await createOmniClient({
      endpoint: gw.url,
      key: key.serviceAccountKey,
      env: {},
      delay: (_ms, s) => (s?.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve()),
    });
  });
  afterEach(async () => {
    await client.close();
    await gw.close();
  });

  const r = (id: string): Resource => res(id, { type: TYPE });
  const tomb = () => ({ metadata: { namespace: NS, type: TYPE, version: 'undefined', phase: 'running' }, spec: {} });
  const bootstrap = (ids: string[], at: number) => ({
    event: [
      ...ids.map((id) => ({ resource: wireResource(r(id)) })),
      { resource: tomb(), event_type: 3, bookmark: rev(at) },
    ],
  });

  async function collect(n: number, onReset: () => void): Promise<WatchEvent[][]> {
    const ac = new AbortController();
    const out: WatchEvent[][] = [];
    for await (const b of client.state.watchKind(NS, TYPE, { signal: ac.signal, onReset })) {
      out.push(b);
      if (out.length === n) ac.abort();
    }
    return out;
  }

  it('is the refused bookmark of a compacted revision: onReset, then a fresh bootstrap', async () => {
    let n = 0;
    gw.on('Watch', async (q, s) => {
      const call = n++;
      const w = new LineWriter(s);
      await w.result({});
      if (call === 0) {
        await w.result(bootstrap(['a'], 5));
        return w.drop();
      }
      if (call === 1) {
        expect((q.body['options'] as Record<string, unknown>)['start_from_bookmark']).toBe(rev(5));
        await w.result({ event: [{ event_type: 4, error: COMPACTED }] });
        return; // Omni keeps such a stream open; the client must not wait on it
      }
      await w.result(bootstrap(['a', 'b'], 9));
    });
    const resets: number[] = [];
    const batches = await collect(2, () => resets.push(n));
    expect(batches.map((b) => b.map((e) => `${e.type}:${e.resource.metadata.id}`))).toEqual([
      ['created:a', 'bootstrapped:'],
      ['created:a', 'created:b', 'bootstrapped:'],
    ]);
    expect(resets).toEqual([2]);
    expect((gw.calls('Watch')[2]?.body['options'] as Record<string, unknown>)['bootstrap_contents']).toBe(true);
  });

  it('still throws on a fresh watch, and on a resumed one once it has delivered events', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      await w.result({ event: [{ event_type: 4, error: 'buffer overrun' }] });
    });
    await expect(collect(1, () => undefined)).rejects.toBeInstanceOf(WatchErroredError);

    let n = 0;
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      if (n++ === 0) {
        await w.result(bootstrap([], 5));
        return w.drop();
      }
      await w.result({ event: [{ resource: wireResource(r('c')), bookmark: rev(6) }] });
      await w.result({ event: [{ event_type: 4, error: 'buffer overrun' }] });
    });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const b of client.state.watchKind(NS, TYPE))
        seen.push(...b.map((e) => `${e.type}:${e.resource.metadata.id}`));
    })().catch((e: unknown) => e);
    expect(seen).toEqual(['bootstrapped:', 'created:c']);
    expect(err).toBeInstanceOf(WatchErroredError);
  });
});

// ---------------------------------------------------------------------------------------------
// Against the sim, with a loopback proxy that cuts a watch where a test says

const SIM_NS = 'infra-provider:rec';
const SIM_TYPE = 'MachineStatus.rec.infraprovider.sidero.dev';
const OWNER = 'rec.MachineStatusController';
const SCENARIO = `
omni: { version: "1.9.3" }
identities:
  - name: infra-provider:rec
resources:
  - metadata: { namespace: infra-provider, type: InfraProviders.omni.sidero.dev, id: rec }
    spec: {}
${['r1', 'r2', 'r3']
  .map(
    (id) => `  - metadata: { namespace: "${SIM_NS}", type: ${SIM_TYPE}, id: ${id}, owner: ${OWNER}${
      id === 'r1' ? ', finalizers: ' + '[rec.Hold]' : ''
    } }
    proto_spec: ""`,
  )
  .join('\n')}
`;

/**
 * A proxy in front of the sim for Watch calls: `hold` keeps the next Watch from reaching the sim until
 * released; `cutAt` cuts a stream after that many whole lines and half of the next one; `cut()` cuts
 * the open stream now. Everything else passes.
 */
class CuttingProxy {
  private readonly proxy: Promise<TamperProxy>;
  private open: { res: ServerResponse; up: ClientRequest } | undefined;
  private held: (() => void) | undefined;
  readonly watches: Record<string, unknown>[] = [];
  /** For the next Watch only: whole lines to pass before the cut. */
  cutAt: number | undefined;
  hold = false;

  constructor(private readonly upstream: string) {
    this.proxy = startTamperProxy(upstream, (r) =>
      r.rpc === 'Watch' ? { kind: 'respond', write: (res, req) => this.watch(r, res, req) } : undefined,
    );
  }

  endpoint(): Promise<string> {
    return this.proxy.then((p) => p.endpoint);
  }

  release(): void {
    this.hold = false;
    this.held?.();
    this.held = undefined;
  }

  cut(): void {
    this.open?.res.socket?.destroy();
    this.open?.up.destroy();
    this.open = undefined;
  }

  async close(): Promise<void> {
    this.release();
    this.cut();
    await (await this.proxy).close();
  }

  private async watch(r: TamperRequest, res: ServerResponse, req: IncomingMessage): Promise<void> {
    this.watches.push(r.body as Record<string, unknown>);
    if (this.hold) await new Promise<void>((resolve) => (this.held = resolve));
    const cutAt = this.cutAt;
    this.cutAt = undefined;
    const up = new URL(this.upstream);
    const headers = { ...req.headers, host: up.host };
    delete headers['accept-encoding'];
    const upReq = httpRequest({ host: up.hostname, port: up.port, method: 'POST', path: req.url, headers });
    this.open = { res, up: upReq };
    upReq.on('error', () => res.destroy());
    res.on('close', () => upReq.destroy());
    upReq.on('response', (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, { 'content-type': 'application/json' });
      let buf = '';
      let lines = 0;
      upRes.setEncoding('utf8');
      upRes.on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl + 1);
          buf = buf.slice(nl + 1);
          if (cutAt !== undefined && lines === cutAt) {
            // Half a line, then the connection goes: what a consumer had of this line is lost.
            res.write(line.slice(0, Math.floor(line.length / 2)), () => this.cut());
            return;
          }
          res.write(line);
          lines++;
        }
      });
      upRes.on('end', () => res.end());
    });
    upReq.end(JSON.stringify(r.body));
  }
}

describe('against the sim: watches cut where Omni has or has not given a bookmark yet', () => {
  let sim: Sim;
  let proxy: CuttingProxy;
  let client: OmniClient;
  let writer: OmniClient;

  beforeEach(async () => {
    sim = await createSim(SCENARIO);
    proxy = new CuttingProxy(sim.endpoint);
    const saKey = sim.keys['infra-provider:rec'] ?? '';
    client = await createOmniClient({
      endpoint: await proxy.endpoint(),
      key: saKey,
      env: {},
      delay: (_ms, s) => (s?.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve()),
    });
    writer = await createOmniClient({ endpoint: sim.endpoint, key: saKey, env: {} });
  });
  afterEach(async () => {
    await client.close();
    await writer.close();
    await proxy.close();
    await sim.close();
  });

  const ms = (id: string): Resource => ({
    metadata: newMetadata({ namespace: SIM_NS, type: SIM_TYPE, id }, { owner: OWNER }),
    spec: { protoSpec: new Uint8Array(0) },
  });

  /** Reads watchKind into `seen` until `stop` aborts it. */
  function consume(onReset: () => void): { seen: WatchEvent[][]; stop: () => Promise<void> } {
    const ac = new AbortController();
    const seen: WatchEvent[][] = [];
    const done = (async () => {
      for await (const b of client.state.watchKind(SIM_NS, SIM_TYPE, { signal: ac.signal, onReset })) seen.push(b);
    })();
    return {
      seen,
      stop: async () => {
        ac.abort();
        await done;
      },
    };
  }

  const until = async (what: string, pred: () => boolean): Promise<void> => {
    for (let i = 0; i < 300 && !pred(); i++) await new Promise((r) => setTimeout(r, 10));
    if (!pred()) throw new Error(`timed out waiting for ${what}`);
  };
  const flat = (seen: WatchEvent[][]) => seen.flat().map((e) => `${e.type}:${e.resource.metadata.id}`);

  it('cut during the bootstrap (no bookmark yet): bootstraps again, nothing delivered twice, no reset', async () => {
    proxy.cutAt = 1; // the empty first message, then half of the bootstrap
    proxy.hold = false;
    let resets = 0;
    const w = consume(() => resets++);
    await until('the second watch', () => proxy.watches.length === 2);
    await until('the bootstrap', () => flat(w.seen).includes('noop:'));
    await writer.state.create(ms('r4'));
    await until('r4', () => flat(w.seen).includes('created:r4'));
    await w.stop();
    expect(flat(w.seen)).toEqual(['created:r1', 'created:r2', 'created:r3', 'bootstrapped:', 'noop:', 'created:r4']);
    expect(resets).toBe(0);
    // Nothing to resume from: the second watch asks for the bootstrap again.
    expect(proxy.watches.map((b) => 'start_from_bookmark' in (b['options'] as object))).toEqual([false, false]);
    // Bookmarks only where Omni puts them.
    expect(w.seen.flat().map((e) => e.bookmark !== undefined)).toEqual([false, false, false, true, true, true]);
  });

  it('cut after live events: resumes from the last bookmark, gets what happened meanwhile once', async () => {
    let resets = 0;
    const w = consume(() => resets++);
    await until('the bootstrap', () => flat(w.seen).includes('noop:'));
    await writer.state.create(ms('r4'));
    const r2 = await writer.state.get(ms('r2').metadata);
    await writer.state.update({ ...r2, metadata: { ...r2.metadata, labels: { k: 'v' } } });
    await until('the live events', () => flat(w.seen).includes('updated:r2'));
    const last = w.seen.flat().at(-1)?.bookmark;
    proxy.hold = true;
    proxy.cut();
    await until('the reconnect', () => proxy.watches.length === 2);
    // While the consumer is away: a create and a destroy.
    await writer.state.create(ms('r5'));
    await writer.state.destroy(ms('r4').metadata, { owner: OWNER });
    proxy.release();
    await until('the missed events', () => flat(w.seen).includes('destroyed:r4'));
    await w.stop();
    expect(flat(w.seen)).toEqual([
      'created:r1',
      'created:r2',
      'created:r3',
      'bootstrapped:',
      'noop:',
      'created:r4',
      'updated:r2',
      'created:r5',
      'destroyed:r4',
    ]);
    expect(resets).toBe(0);
    const resumed = proxy.watches[1]?.['options'] as Record<string, unknown>;
    expect(resumed['start_from_bookmark']).toBe(Buffer.from(last ?? []).toString('base64'));
    expect(resumed['bootstrap_contents']).toBeUndefined();
  });

  it("the provider's cache: a watch cut before established keeps the release, takes no absence for it", async () => {
    proxy.cutAt = 1;
    proxy.hold = true;
    const cache = new ProviderCache(client.state, { providerId: 'rec', live: true });
    try {
      const outcome = cache.wait(ms('r1').metadata, 'no-finalizers', 5_000);
      let settled: string | undefined;
      void outcome.then((o) => (settled = o));
      // The first watch is held; let it go, and it is cut after its first line.
      await until('the first watch', () => proxy.watches.length === 1);
      proxy.hold = true;
      const first = proxy.watches.length;
      proxy.release();
      proxy.hold = true;
      await until('the second watch', () => proxy.watches.length === first + 1);
      expect(settled).toBeUndefined();
      const r1 = await writer.state.get(ms('r1').metadata);
      await writer.state.update({ ...r1, metadata: { ...r1.metadata, finalizers: [] } });
      proxy.release();
      expect(await outcome).toBe('released');
      // Both watches without bootstrap contents (false is not sent): the List is what the cache starts from.
      expect(proxy.watches.map((b) => (b['options'] as Record<string, unknown>)['bootstrap_contents'])).toEqual([
        undefined,
        undefined,
      ]);
    } finally {
      cache.close();
    }
  });
});
