// watchKind: bootstrap, bookmarks, resume after a dropped connection, refused bookmark -> reset,
// ERRORED events, bounded reconnects with capped jittered backoff.

import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import { PermissionDeniedError } from '../../src/omni-api/errors.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { WatchErroredError } from '../../src/omni-api/errors.js';
import type { WatchEvent } from '../../src/omni-api/state.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { LineWriter, res, startFakeGateway, wireResource, type FakeGateway } from '../helpers/fake-gateway.js';

const NS = 'infra-provider';
const TYPE = 'MachineRequests.omni.sidero.dev';
const B1 = Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]).toString('base64');
const B2 = Buffer.from([0, 0, 0, 0, 0, 0, 0, 2]).toString('base64');
const B3 = Buffer.from([0, 0, 0, 0, 0, 0, 0, 3]).toString('base64');

let key: GeneratedKey;
let gw: FakeGateway;
let client: OmniClient;
let delays: number[];

beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});
beforeEach(async () => {
  gw = await startFakeGateway();
  delays = [];
  client = await createOmniClient({
    endpoint: gw.url,
    key: key.serviceAccountKey,
    env: {},
    random: () => 0.999,
    delay: (ms, signal) => {
      delays.push(ms);
      return signal?.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve();
    },
  });
});
afterEach(async () => {
  await client.close();
  await gw.close();
});

const r = (id: string): Resource => res(id, { type: TYPE });
const tomb = (): Record<string, unknown> => ({
  metadata: { namespace: NS, type: TYPE, version: 'undefined', phase: 'running' },
  spec: {},
});
const created = (id: string, bookmark: string) => ({ resource: wireResource(r(id)), bookmark });
const bootstrapped = (bookmark: string) => ({ resource: tomb(), event_type: 3, bookmark });

/** Collects batches until `n` have arrived, then stops the watch. */
async function take(n: number, onReset?: () => void): Promise<WatchEvent[][]> {
  const ac = new AbortController();
  const out: WatchEvent[][] = [];
  for await (const batch of client.state.watchKind(NS, TYPE, {
    signal: ac.signal,
    ...(onReset ? { onReset } : {}),
    labelQueries: [[{ key: 'k', op: 'EXISTS' }]],
  })) {
    out.push(batch);
    if (out.length === n) ac.abort();
  }
  return out;
}

describe('watchKind', () => {
  it('asks for a bootstrapped, bookmarked, aggregated kind watch (api_version 1); drops initial, empty', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      await w.result({ event: [created('a', B1), created('b', B1), bootstrapped(B1)] });
      await w.result({}); // Omni's infra-provider filter may forward empty batches
      await w.result({
        event: [{ resource: wireResource(r('a')), old: wireResource(r('a')), event_type: 1, bookmark: B2 }],
      });
    });
    const batches = await take(2);
    expect(batches.map((b) => b.map((e) => `${e.type}:${e.resource.metadata.id}`))).toEqual([
      ['created:a', 'created:b', 'bootstrapped:'],
      ['updated:a'],
    ]);
    expect(batches[1]?.[0]?.old?.metadata.id).toBe('a');
    expect(Buffer.from(batches[0]?.[2]?.bookmark ?? []).toString('base64')).toBe(B1);
    expect(gw.calls('Watch')[0]?.body).toEqual({
      namespace: NS,
      type: TYPE,
      options: {
        label_query: [{ terms: [{ key: 'k' }] }],
        aggregated: true,
        bootstrap_contents: true,
        bootstrap_bookmark: true,
      },
      api_version: 1,
    });
  });

  it("previous: false leaves an UPDATED event's old resource unread; its resource is checked as ever", async () => {
    const other = { ...wireResource(r('b')), metadata: { namespace: 'elsewhere', id: '' } };
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      // `old` names another resource of another namespace: read, that ends the watch (hostile-answers.test.ts).
      await w.result({ event: [{ resource: wireResource(r('a')), old: other, event_type: 1, bookmark: B1 }] });
      await w.result({ event: [{ resource: { ...wireResource(r('c')), metadata: { namespace: NS, type: TYPE } } }] });
    });
    const ac = new AbortController();
    const batches: WatchEvent[][] = [];
    const read = async (): Promise<void> => {
      for await (const batch of client.state.watchKind(NS, TYPE, { signal: ac.signal, previous: false })) {
        batches.push(batch);
      }
    };
    // The next event has no ID: still a malformed answer, the watch ends on it.
    await expect(read()).rejects.toMatchObject({ code: 'STUB_PROTOCOL' });
    expect(batches.map((b) => b.map((e) => `${e.type}:${e.resource.metadata.id}`))).toEqual([['updated:a']]);
    expect(batches[0]?.[0]).not.toHaveProperty('old');
    expect(gw.calls('Watch')).toHaveLength(1);
  });

  it('resumes from the last bookmark after the server drops the connection', async () => {
    let n = 0;
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      if (n++ === 0) {
        await w.result({ event: [created('a', B1), bootstrapped(B1)] });
        await w.result({ event: [{ resource: wireResource(r('b')), bookmark: B2 }] });
        return w.drop();
      }
      await w.result({ event: [{ resource: wireResource(r('c')), bookmark: B3 }] });
    });
    let resets = 0;
    const batches = await take(3, () => resets++);
    expect(batches.map((b) => b.map((e) => e.resource.metadata.id))).toEqual([['a', ''], ['b'], ['c']]);
    expect(resets).toBe(0);
    const second = gw.calls('Watch')[1]?.body;
    expect(second).toEqual({
      namespace: NS,
      type: TYPE,
      options: { label_query: [{ terms: [{ key: 'k' }] }], aggregated: true, start_from_bookmark: B2 },
      api_version: 1,
    });
    expect(delays).toHaveLength(1);
  });

  it('when the bookmark is refused, calls onReset and starts again from a fresh bootstrap', async () => {
    let n = 0;
    gw.on('Watch', async (q, s) => {
      const call = n++;
      if (call === 1) {
        expect((q.body['options'] as Record<string, unknown>)['start_from_bookmark']).toBe(B1);
        const w = new LineWriter(s, { status: 400 });
        await w.error(9, 'invalid bookmark');
        return w.end();
      }
      const w = new LineWriter(s);
      await w.result({});
      await w.result({ event: [created(call === 0 ? 'a' : 'z', B1), bootstrapped(B1)] });
      if (call === 0) w.drop();
    });
    const resets: number[] = [];
    const batches = await take(2, () => resets.push(n));
    expect(resets).toEqual([2]); // after the refusal, before the new bootstrap
    expect(batches.map((b) => b[0]?.resource.metadata.id)).toEqual(['a', 'z']);
    expect((gw.calls('Watch')[2]?.body['options'] as Record<string, unknown>)['bootstrap_contents']).toBe(true);
  });

  it('an ERRORED event throws, after the events before it in the batch were delivered', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      await w.result({ event: [created('a', B1), { resource: tomb(), event_type: 4, error: 'buffer overrun' }] });
    });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const b of client.state.watchKind(NS, TYPE)) seen.push(...b.map((e) => e.resource.metadata.id));
    })().catch((e: unknown) => e);
    expect(seen).toEqual(['a']);
    expect(err).toBeInstanceOf(WatchErroredError);
    expect((err as Error).message).toContain('buffer overrun');
    expect(gw.calls('Watch')).toHaveLength(1);
  });

  it('a refusal (PermissionDenied before any line) is thrown, not retried', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s, { status: 403 });
      await w.error(7, 'namespace not allowed');
      w.end();
    });
    await expect(take(1)).rejects.toBeInstanceOf(PermissionDeniedError);
    expect(gw.calls('Watch')).toHaveLength(1);
  });

  it('reconnects are bounded and back off exponentially, capped, with jitter', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
      w.drop();
    });
    await expect(take(1)).rejects.toThrow(/Watch/);
    expect(gw.calls('Watch')).toHaveLength(11);
    // random() = 0.999: the upper end of [d/2, d), d = min(15 s, 250 ms * 2^n)
    expect(delays).toEqual(
      [250, 500, 1000, 2000, 4000, 8000, 15000, 15000, 15000, 15000].map((d) => Math.round(d / 2 + (0.999 * d) / 2)),
    );
  });

  it('stops quietly when the signal aborts while waiting for events', async () => {
    gw.on('Watch', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({});
    });
    const ac = new AbortController();
    const it = client.state.watchKind(NS, TYPE, { signal: ac.signal })[Symbol.asyncIterator]();
    const pending = it.next();
    setTimeout(() => ac.abort(), 50);
    expect((await pending).done).toBe(true);
  });
});
