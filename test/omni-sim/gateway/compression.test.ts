// Compression as Omni does it and as the client asks for it, over real HTTP on loopback:
// - the sim answers a gzip List with one sync-flushed deflate block per item (Omni's gateway flushes
//   per stream message, its compress handler sync-flushes on every flush), so the bytes up to each
//   flush inflate to whole lines;
// - the client asks for gzip as its policy says (compression.ts: nothing on loopback by default,
//   List and Watch with 'streams'), and decodes a per-event gzip Watch while it stays open.

import { constants, gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../../src/omni-client/client.js';
import { providerNamespace, providerType, T } from '../../../src/omni-api/resource.js';
import type { WatchEvent } from '../../../src/omni-api/state.js';
import { bareMetalMachine, machineUuid, providerRegistration } from '../../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../../src/omni-sim/index.js';
import { noDelay } from '../../helpers/fake-gateway.js';
import { signHeaders } from '../../helpers/raw-client.js';
import { startTamperProxy, type TamperProxy } from '../../helpers/tamper-proxy.js';

const ID = 'bare-metal';
const MACHINES = 5;
let sim: Sim;
let proxy: TamperProxy;

beforeAll(async () => {
  sim = await createSim({
    omniVersion: '1.9.3',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    resources: [
      ...providerRegistration(ID, { static: true }),
      ...Array.from({ length: MACHINES }, (_, i) => bareMetalMachine(ID, machineUuid(i))).flat(),
    ],
    faults: {},
  });
  proxy = await startTamperProxy(sim.endpoint);
});
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
});

const key = () => sim.keys[`infra-provider:${ID}`]!;
const client = (gzip?: 'streams' | 'none') =>
  createOmniClient({
    endpoint: proxy.endpoint,
    key: key(),
    delay: noDelay,
    env: {},
    retries: 0,
    ...(gzip ? { gzip } : {}),
  });

/** Positions just past each sync-flush marker (an empty stored block: 00 00 ff ff) of a gzip body. */
function flushEnds(body: Buffer): number[] {
  const out: number[] = [];
  for (
    let i = body.indexOf(Buffer.from([0, 0, 0xff, 0xff]));
    i >= 0;
    i = body.indexOf(Buffer.from([0, 0, 0xff, 0xff]), i + 1)
  )
    out.push(i + 4);
  return out;
}

describe('the sim compresses a List as Omni does', () => {
  it('one sync-flushed block per item: the bytes up to each flush inflate to one more whole line', async () => {
    const k = sim.generatedKeys[`infra-provider:${ID}`]!;
    const headers = await signHeaders(
      { name: k.name, armoredPrivateKey: k.armoredPrivateKey },
      '/cosi.resource.State/List',
    );
    const res = await request(`${sim.endpoint}/api/cosi.resource.State/List`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip', ...headers },
      body: JSON.stringify({ namespace: 'infra-provider', type: T.InfraMachine }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-encoding']).toBe('gzip');
    const body = Buffer.from(await res.body.arrayBuffer());
    const whole = gunzipSync(body).toString('utf8');
    expect(whole.split('\n').filter((l) => l !== '')).toHaveLength(MACHINES);
    const lineCounts = flushEnds(body).map((end) => {
      const text = gunzipSync(body.subarray(0, end), { finishFlush: constants.Z_SYNC_FLUSH }).toString('utf8');
      expect(text.endsWith('\n')).toBe(true);
      return text.split('\n').length - 1;
    });
    expect(lineCounts).toEqual(Array.from({ length: MACHINES }, (_, i) => i + 1));
  });
});

describe('the client asks for gzip as its policy says', () => {
  it('none: nothing asks for gzip; streams: List and Watch but not Get', async () => {
    const plain = await client('none');
    const gz = await client('streams');
    try {
      const n0 = proxy.seen.length;
      const a = await plain.state.list('infra-provider', T.InfraMachine);
      const b = await gz.state.list('infra-provider', T.InfraMachine);
      await gz.state.get({ namespace: 'infra-provider', type: T.InfraMachine, id: machineUuid(0) });
      expect(b).toEqual(a);
      expect(a).toHaveLength(MACHINES);
      expect(proxy.seen.slice(n0).map((r) => [r.rpc, r.headers['accept-encoding']])).toEqual([
        ['List', undefined],
        ['List', 'gzip'],
        ['Get', undefined],
      ]);
    } finally {
      await plain.close();
      await gz.close();
    }
  });

  it('a gzip Watch, one block per event, is decoded as each event arrives while the stream stays open', async () => {
    const gz: OmniClient = await client('streams');
    const ac = new AbortController();
    try {
      const ns = providerNamespace(ID);
      const type = providerType('MachineStatus', ID);
      const it = gz.state.watchKind(ns, type, { signal: ac.signal })[Symbol.asyncIterator]();
      const n0 = proxy.seen.length;
      const next = async (want: (e: WatchEvent) => boolean): Promise<WatchEvent> => {
        for (;;) {
          const r = await it.next();
          if (r.done) throw new Error('the watch ended');
          const e = r.value.find(want);
          if (e) return e;
        }
      };
      // Bootstrapped first; then each write's event must come out of the open stream before the next write.
      await next((e) => e.type === 'bootstrapped');
      for (let i = 0; i < 3; i++) {
        const p = { namespace: ns, type, id: machineUuid(i) };
        const cur = sim.store.peek(p)!;
        sim.store.update(
          { name: 't', email: 't', role: 'Admin', internal: true },
          { ...cur, metadata: { ...cur.metadata, labels: { ...cur.metadata.labels, step: String(i) } } },
          cur.metadata.owner,
        );
        const got = (await next((e) => e.type === 'updated')).resource;
        expect([got.metadata.id, got.metadata.labels['step']]).toEqual([machineUuid(i), String(i)]);
      }
      expect(proxy.seen.slice(n0).map((r) => [r.rpc, r.headers['accept-encoding']])).toEqual([['Watch', 'gzip']]);
    } finally {
      ac.abort();
      await gz.close();
    }
  });
});
