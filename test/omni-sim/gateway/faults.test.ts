// Faults of the simulated Omni, seen over HTTP the way a client meets them.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  FaultConfigError,
  faultConfigFromPlain,
  faultConfigToPlain,
} from '../../../src/omni-sim/gateway/fault-config.js';
import { createSim, type Sim } from '../../../src/omni-sim/index.js';
import { rawCall, type RawKey } from '../../helpers/raw-client.js';
import { openStream } from '../../helpers/sim-stream.js';

const NS = 'infra-provider';
const TYPE = 'InfraMachineStatuses.omni.sidero.dev';
const OTHER = 'Other';

let sim: Sim;
let key: RawKey;

beforeAll(async () => {
  sim = await createSim(
    `
omni: { version: "1.8" }
identities: [{ name: admin@example.org, role: Admin }]
faults: { unavailable_burst: 1 }
`,
    { access: (c) => c.store, controllers: false },
  );
  const k = sim.generatedKeys['admin@example.org']!;
  key = { name: k.name, armoredPrivateKey: k.armoredPrivateKey };
});
afterAll(async () => {
  await sim?.close();
});

const call = (method: string, body: unknown, opts = {}) => rawCall(sim.endpoint, key, method, body, opts);
const create = (id: string, type = TYPE) =>
  call('Create', {
    resource: { metadata: { namespace: NS, type, id, version: 'undefined', phase: 'running' }, spec: {} },
  });
type Res = { resource: { metadata: Record<string, unknown>; spec: Record<string, unknown> } };

describe('faults', () => {
  it('a burst of Unavailable from the scenario, then a burst set at run time', async () => {
    const first = await call('Get', { namespace: NS, type: TYPE, id: 'x' });
    expect([first.status, (first.json as { code: number }).code]).toEqual([503, 14]);
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(404);
    sim.faults.set({ unavailableBurst: 2 });
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(503);
    const list = await call('List', { namespace: NS, type: TYPE });
    expect([list.status, (list.json as { code: number }).code]).toEqual([503, 14]);
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(404);
  });

  it('added latency per call', async () => {
    sim.faults.set({ latencyMs: 150 });
    try {
      const t0 = performance.now();
      await call('Get', { namespace: NS, type: TYPE, id: 'x' });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    } finally {
      sim.faults.set({ latencyMs: undefined });
    }
  });

  it('a clock offset moves the Date header and the signature skew check together', async () => {
    sim.faults.set({ clockOffsetMs: 10 * 60_000 });
    try {
      const nowS = Math.floor(Date.now() / 1000);
      expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' }, { timestamp: nowS })).status).toBe(401);
      const ok = await call('Get', { namespace: NS, type: TYPE, id: 'x' }, { timestamp: nowS + 600 });
      expect(ok.status).toBe(404);
      expect(Date.parse(String(ok.headers['date'])) - Date.now()).toBeGreaterThan(9 * 60_000);
      // timestamps written by the server follow its clock too
      const c = await call(
        'Create',
        {
          resource: {
            metadata: { namespace: NS, type: TYPE, id: 'clocked', version: 'undefined', phase: 'running' },
            spec: {},
          },
        },
        { timestamp: nowS + 600 },
      );
      expect(Date.parse(String((c.json as Res).resource.metadata['created'])) - Date.now()).toBeGreaterThan(9 * 60_000);
    } finally {
      sim.faults.set({ clockOffsetMs: undefined });
    }
  });

  it('a version-conflict storm: a concurrent writer wins N times, then the client gets through', async () => {
    await create('storm', 'Storm');
    sim.faults.set({ conflictStorm: { type: 'Storm', namespace: NS, count: 2 } });
    const codes: number[] = [];
    let version = '';
    for (let i = 0; i < 5; i++) {
      const cur = (await call('Get', { namespace: NS, type: 'Storm', id: 'storm' })).json as Res;
      const u = await call('Update', {
        new_resource: { metadata: { ...cur.resource.metadata, finalizers: ['mine'] }, spec: cur.resource.spec },
      });
      codes.push(u.status === 200 ? 0 : (u.json as { code: number }).code);
      if (u.status === 200) {
        version = String((u.json as Res).resource.metadata['version']);
        break;
      }
    }
    expect(codes).toEqual([9, 9, 0]);
    expect(version).toBe('4'); // 1 + two bumps by the storm + the client's update
    expect(sim.faults.config.conflictStorm?.count).toBe(0);
  });

  it('watch streams are dropped after N events', async () => {
    sim.faults.set({ dropWatchAfterEvents: 2 });
    try {
      const s = await openStream(sim.endpoint, key, 'Watch', {
        namespace: NS,
        type: 'Dropped',
        options: { bootstrap_bookmark: true },
        api_version: 1,
      });
      expect(await s.next()).toEqual({ result: {} });
      await s.next(); // NOOP: event 1
      await create('d1', 'Dropped'); // event 2: delivered, then the connection is cut
      expect(((await s.next()) as { result: { event: unknown[] } }).result.event).toHaveLength(1);
      expect(await s.ended).toBe('error');
    } finally {
      sim.faults.set({ dropWatchAfterEvents: undefined });
    }
  });

  it('a restart keeps state, breaks open streams and refuses the bookmarks issued before it', async () => {
    await create('r1', 'Restart');
    const s = await openStream(sim.endpoint, key, 'Watch', {
      namespace: NS,
      type: 'Restart',
      options: { bootstrap_contents: true },
      api_version: 1,
    });
    await s.next();
    await s.next();
    const boot = (await s.next()) as { result: { event: { bookmark: string }[] } };
    const bm = boot.result.event[0]?.bookmark;
    expect(sim.gateway.openStreams).toBeGreaterThan(0);
    sim.faults.restart();
    expect(await s.ended).toBe('error');
    expect(sim.faults.restartCount).toBe(1);
    // etcd's history before the restart is gone: the watch is established, then refused with ERRORED.
    const again = await openStream(sim.endpoint, key, 'Watch', {
      namespace: NS,
      type: 'Restart',
      options: { start_from_bookmark: bm },
      api_version: 1,
    });
    try {
      expect(again.status).toBe(200);
      expect(await again.next()).toEqual({ result: {} });
      expect(await again.next()).toEqual({
        result: { event: [{ event_type: 4, error: 'etcdserver: mvcc: required revision has been compacted' }] },
      });
    } finally {
      again.close();
    }
    const g = await call('Get', { namespace: NS, type: 'Restart', id: 'r1' });
    expect((g.json as Res).resource.metadata['version']).toBe('1');
    // a fresh watch after the restart works and its bookmarks resume
    const f = await openStream(sim.endpoint, key, 'Watch', {
      namespace: NS,
      type: 'Restart',
      options: { bootstrap_bookmark: true },
      api_version: 1,
    });
    try {
      await f.next();
      const noop = (await f.next()) as { result: { event: { bookmark: string }[] } };
      await create('r2', 'Restart');
      const r = await openStream(sim.endpoint, key, 'Watch', {
        namespace: NS,
        type: 'Restart',
        options: { start_from_bookmark: noop.result.event[0]?.bookmark },
        api_version: 1,
      });
      await r.next();
      const ev = (await r.next()) as { result: { event: { resource: { metadata: { id: string } } }[] } };
      expect(ev.result.event[0]?.resource.metadata.id).toBe('r2');
      r.close();
    } finally {
      f.close();
    }
  });

  it('injected ERRORED events end open watches (dropped for api_version 0 clients)', async () => {
    const v1 = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Err', api_version: 1 });
    const v0 = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Err' });
    await v1.next();
    await v0.next();
    sim.faults.failWatches('buffer overrun');
    const e = (await v1.next()) as { result: { event: { event_type: number; error: string; resource?: unknown }[] } };
    expect(e.result.event[0]).toEqual({ event_type: 4, error: 'buffer overrun' });
    expect(await v1.ended).toBe('end');
    expect(await v0.ended).toBe('end');
    await expect(v0.next()).rejects.toThrow(/ended/);
  });
});

type Md = Record<string, unknown>;
const stored = (id: string, type = TYPE) => sim.store.peek({ namespace: NS, type, id });
/** An Update adding `fin` to what the store holds now (or to `from`, an earlier read). */
const update = (id: string, fin: string, from?: Md) => {
  const cur = from ?? (stored(id)!.metadata as unknown as Md);
  return call('Update', {
    new_resource: {
      metadata: { ...cur, finalizers: [...((cur['finalizers'] as string[] | undefined) ?? []), fin] },
      spec: {},
    },
  });
};
/** The call fails without an HTTP answer (the socket closed under it). */
const lost = async (p: Promise<unknown>) => {
  await expect(p).rejects.toThrow(/other side closed|socket|ECONNRESET/i);
};

describe('lose_write_answers: a client write applied, then its connection destroyed before any answer byte', () => {
  afterEach(() => sim.faults.set({ loseWriteAnswers: undefined }));

  it('a bare count: the next write is applied and its connection dropped; the one after is answered', async () => {
    const before = sim.faults.lostWriteAnswers;
    sim.faults.set({ loseWriteAnswers: { count: 1 } });
    await lost(create('l1'));
    expect(stored('l1')?.metadata.version).toBe('1');
    expect((await create('l2')).status).toBe(200);
    expect(sim.faults.lostWriteAnswers - before).toBe(1);
    expect(sim.faults.config.loseWriteAnswers?.count).toBe(0);
    // Sent again, the lost Create meets what it did: AlreadyExists, nothing applied twice.
    const again = await create('l1');
    expect([again.status, (again.json as { code: number }).code]).toEqual([409, 6]);
  });

  it('a filter by method and resource; a failed write is answered and not counted; the resend is refused', async () => {
    await create('a');
    await create('b');
    const v1 = stored('a')!.metadata as unknown as Md;
    sim.faults.set({ loseWriteAnswers: { count: 1, method: 'Update', type: TYPE, id: 'a' } });
    expect((await create('c')).status).toBe(200); // not an Update
    expect((await update('b', 'x')).status).toBe(200); // another resource
    await lost(update('a', 'first'));
    expect(stored('a')?.metadata).toMatchObject({ version: '2', finalizers: ['first'] });
    expect(sim.faults.config.loseWriteAnswers?.count).toBe(0);

    sim.faults.set({ loseWriteAnswers: { count: 1, method: 'Update', id: 'a' } });
    const stale = await update('a', 'stale', v1); // version 1: refused, answered, not counted
    // FailedPrecondition, as grpc-gateway maps it;
    expect([stale.status, (stale.json as { code: number }).code]).toEqual([400, 9]);
    expect(sim.faults.config.loseWriteAnswers?.count).toBe(1);
    const v2 = stored('a')!.metadata as unknown as Md;
    await lost(update('a', 'second', v2));
    // The client sends its lost Update again, as read: the version moved, so it is refused.
    const resend = await update('a', 'second', v2);
    // FailedPrecondition, as grpc-gateway maps it;
    expect([resend.status, (resend.json as { code: number }).code]).toEqual([400, 9]);
    expect(stored('a')?.metadata).toMatchObject({ version: '3', finalizers: ['first', 'second'] });
  });

  it('a lost Destroy is applied: the resend answers NotFound', async () => {
    await create('d', OTHER);
    sim.faults.set({ loseWriteAnswers: { count: 1, method: 'Destroy', type: OTHER } });
    await lost(call('Destroy', { namespace: NS, type: OTHER, id: 'd' }));
    expect(stored('d', OTHER)).toBeUndefined();
    const again = await call('Destroy', { namespace: NS, type: OTHER, id: 'd' });
    expect([again.status, (again.json as { code: number }).code]).toEqual([404, 5]);
  });
});

describe('lose_write_answers in the scenario form', () => {
  it('a count or a map, both ways', () => {
    expect(faultConfigFromPlain({ lose_write_answers: 3 }, 'faults')).toEqual({ loseWriteAnswers: { count: 3 } });
    expect(faultConfigToPlain({ loseWriteAnswers: { count: 3 } })).toEqual({ lose_write_answers: 3 });
    const plain = {
      lose_write_answers: { count: 2, method: 'TeardownAndDestroy', type: 'T', namespace: 'n', id: 'i' },
    };
    const c = faultConfigFromPlain(plain, 'faults');
    expect(c).toEqual({
      loseWriteAnswers: { count: 2, method: 'TeardownAndDestroy', type: 'T', namespace: 'n', id: 'i' },
    });
    expect(faultConfigToPlain(c)).toEqual(plain);
  });

  it.each([
    [{ lose_write_answers: -1 }, 'faults.lose_write_answers: expected a non-negative integer'],
    [{ lose_write_answers: { method: 'Update' } }, 'faults.lose_write_answers: count is required'],
    [
      { lose_write_answers: { count: 1, method: 'Get' } },
      'faults.lose_write_answers.method: expected one of Create, Update, Destroy, Teardown, TeardownAndDestroy',
    ],
    [
      { lose_write_answers: { count: 1, kind: 'x' } },
      'faults.lose_write_answers.kind: unknown key (known: type, namespace, id, method, count)',
    ],
    [
      { conflict_storm: { type: 'T', count: 1, method: 'Update' } },
      'faults.conflict_storm.method: unknown key (known: type, namespace, id, count)',
    ],
  ])('%j is refused: %s', (plain, message) => {
    expect(() => faultConfigFromPlain(plain, 'faults')).toThrow(new FaultConfigError(message));
  });
});
