// Resuming watches where Omni puts its bookmarks (issue 16, item 3): bootstrap events carry none, the
// BOOTSTRAPPED marker and live events do, and Omni's etcd refuses a compacted revision only after the
// watch is established (an ERRORED event first). A consumer of GatewayState.watchKind must see every
// change once: nothing lost, nothing twice, a reset only when it has to rebuild.

import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import type { Resource } from '../../src/omni-client/resource.js';
import { WatchErroredError } from '../../src/omni-client/state.js';
import type { WatchEvent } from '../../src/omni-client/types.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/keys.js';
import { LineWriter, res, startFakeGateway, wireResource, type FakeGateway } from '../helpers/fake-gateway.js';

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
    client = await createOmniClient({ endpoint: gw.url, key: key.serviceAccountKey, env: {}, delay: (_ms, s) => (s?.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve()) });
  });
  afterEach(async () => {
    await client.close();
    await gw.close();
  });

  const r = (id: string): Resource => res(id, { type: TYPE });
  const tomb = () => ({ metadata: { namespace: NS, type: TYPE, version: 'undefined', phase: 'running' }, spec: {} });
  const bootstrap = (ids: string[], at: number) => ({ event: [...ids.map((id) => ({ resource: wireResource(r(id)) })), { resource: tomb(), event_type: 3, bookmark: rev(at) }] });

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
    expect(batches.map((b) => b.map((e) => `${e.type}:${e.resource.metadata.id}`))).toEqual([['created:a', 'bootstrapped:'], ['created:a', 'created:b', 'bootstrapped:']]);
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
      for await (const b of client.state.watchKind(NS, TYPE)) seen.push(...b.map((e) => `${e.type}:${e.resource.metadata.id}`));
    })().catch((e: unknown) => e);
    expect(seen).toEqual(['bootstrapped:', 'created:c']);
    expect(err).toBeInstanceOf(WatchErroredError);
  });
});
