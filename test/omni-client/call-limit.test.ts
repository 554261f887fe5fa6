// The one limit on calls in flight (src/omni-client/call-limit.ts): the gate's order, and the
// client's calls under it: never more than --concurrency at Omni, a call's deadline starting only
// once it has its place, writes held by the same number.

import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CallGate, withCallLimit } from '../../src/omni-client/call-limit.js';
import { DeadlineReachedError } from '../../src/omni-client/errors.js';
import type { CoreState } from '../../src/omni-api/state.js';
import { createOmniClient, type OmniClient, type OmniClientOptions } from '../../src/omni-client/client.js';
import { CanceledError } from '../../src/omni-api/errors.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { LineWriter, noDelay, res, sendJson, startFakeGateway, wireResource } from '../helpers/fake-gateway.js';
import type { FakeGateway } from '../helpers/fake-gateway.js';

describe('CallGate', () => {
  it('lets `max` through, then starts waiters by rank, in turn within a rank', async () => {
    const gate = new CallGate(2);
    expect(gate.tryAcquire()).toBe(true);
    expect(gate.tryAcquire()).toBe(true);
    expect(gate.tryAcquire()).toBe(false);
    const order: string[] = [];
    const wait = (name: string, rank: number) => gate.acquire(rank).then(() => order.push(name));
    const all = [wait('a5', 5), wait('b1', 1), wait('c5', 5), wait('d0', 0), wait('e1', 1)];
    expect(gate.waiting).toBe(5);
    for (let i = 0; i < 5; i++) gate.release();
    await Promise.all(all);
    expect(order).toEqual(['d0', 'b1', 'e1', 'a5', 'c5']);
    expect(gate.inFlight).toBe(2);
  });

  it('a waiter whose signal aborts leaves the queue with CanceledError; the place goes to the next', async () => {
    const gate = new CallGate(1);
    expect(gate.tryAcquire()).toBe(true);
    const ac = new AbortController();
    const first = gate.acquire(0, ac.signal);
    const second = gate.acquire(0);
    ac.abort(new Error('stop'));
    await expect(first).rejects.toBeInstanceOf(CanceledError);
    gate.release();
    await second;
    expect(gate.inFlight).toBe(1);
    expect(gate.waiting).toBe(0);
    gate.release();
    expect(gate.inFlight).toBe(0);
  });

  it('a write whose notAfter passed while it waited for its place is not sent (STUB_DEADLINE); a read is', async () => {
    const sent: string[] = [];
    const core = {
      get: async () => (sent.push('get'), res('a')),
      update: async (r: { metadata: { id: string } }) => (sent.push(`update ${r.metadata.id}`), r),
      destroy: async (p: { id: string }) => void sent.push(`destroy ${p.id}`),
    } as unknown as CoreState;
    let t = 1_000;
    const gate = new CallGate(1);
    const state = withCallLimit(core, gate, () => t);
    expect(gate.tryAcquire()).toBe(true);
    const late = state.destroy(res('late').metadata, { notAfter: 1_500 });
    const inTime = state.update(res('in-time'), { notAfter: 3_000 });
    const read = state.get(res('read').metadata);
    t = 2_000;
    gate.release();
    await expect(late).rejects.toBeInstanceOf(DeadlineReachedError);
    await expect(late).rejects.toThrow(/not sent: the time for writes \(--timeout\) passed while it waited/);
    await inTime;
    await read;
    expect(sent).toEqual(['update in-time', 'get']);
    expect(gate.inFlight).toBe(0);
  });

  it('refuses a width that is not a whole number of at least 1', () => {
    expect(() => new CallGate(0)).toThrow(RangeError);
    expect(() => new CallGate(1.5)).toThrow(RangeError);
  });
});

describe('the client under its limit', () => {
  let key: GeneratedKey;
  let gw: FakeGateway;
  const clients: OmniClient[] = [];
  beforeAll(async () => {
    key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
  });
  beforeEach(async () => {
    gw = await startFakeGateway();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await gw.close();
  });
  const mk = async (extra: Partial<OmniClientOptions>): Promise<OmniClient> => {
    const c = await createOmniClient({
      endpoint: gw.url,
      key: key.serviceAccountKey,
      delay: noDelay,
      env: {},
      ...extra,
    });
    clients.push(c);
    return c;
  };
  const ptr = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' };

  /** Answers every call after `ms`, counting the calls open at once at the server. */
  function slowServer(ms: number): { most: () => number } {
    let open = 0;
    let most = 0;
    const hold = (then: () => void) => {
      most = Math.max(most, ++open);
      setTimeout(() => {
        open--;
        then();
      }, ms);
    };
    gw.on('Get', (_q, s) => hold(() => sendJson(s, 200, { resource: wireResource(res('m1')) })));
    gw.on('Update', (_q, s) => hold(() => sendJson(s, 200, { resource: wireResource(res('m1', { version: '2' })) })));
    gw.on('List', (_q, s) =>
      hold(() => {
        const w = new LineWriter(s);
        void w.result({ resource: wireResource(res('m1')) }).then(() => w.end());
      }),
    );
    return { most: () => most };
  }

  it("calls at Omni never exceed --concurrency; a call's deadline starts when it has its place", async () => {
    const server = slowServer(100);
    // 15 calls of 100 ms one at a time take 1.5 s: each within its own 1 s deadline, none within one
    // that started when it was made.
    const c = await mk({ concurrency: 1, timeoutMs: 1_000 });
    const calls = Array.from({ length: 15 }, (_, i) =>
      i % 3 === 0
        ? c.state.list(ptr.namespace, ptr.type)
        : i % 3 === 1
          ? c.state.get(ptr)
          : c.state.update(res('m1', { version: '1' })),
    );
    const settled = await Promise.allSettled(calls);
    expect(settled.filter((s) => s.status === 'rejected').map((s) => String(s.reason))).toEqual([]);
    expect(server.most()).toBe(1);
  });

  it('at --concurrency 3 the server sees three calls at once, and the write window is 3 too', async () => {
    const server = slowServer(50);
    const c = await mk({ concurrency: 3 });
    await Promise.all(Array.from({ length: 12 }, () => c.state.get(ptr)));
    expect(server.most()).toBe(3);
    expect(c.throttling().maxWritesInFlight).toBe(3);
  });
});
