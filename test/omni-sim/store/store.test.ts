import { describe, expect, it } from 'vitest';
import { newMetadata, type Resource } from '../../../src/omni-api/resource.js';
import { EventType, LabelTermOperation as Op } from '../../../src/omni-api/wire.js';
import { INTERNAL, type SimEvent, type WatchParams } from '../../../src/omni-sim/api.js';
import { EMPTY_QUERY } from '../../../src/omni-sim/store/query.js';
import { SimStore } from '../../../src/omni-sim/store/store.js';

const NS = 'infra-provider';
const TYPE = 'InfraMachines.omni.sidero.dev';
const who = INTERNAL;

function makeStore(opts: { historyCapacity?: number; watchBufferCapacity?: number } = {}) {
  let now = Date.parse('2026-08-01T10:00:00Z');
  const clock = { now: () => now };
  const store = new SimStore({ clock, ...opts });
  return { store, tick: (ms = 1000) => (now += ms) };
}

function res(id: string, init: Partial<Parameters<typeof newMetadata>[1]> = {}, spec = [1, 2]): Resource {
  return { metadata: newMetadata({ namespace: NS, type: TYPE, id }, init), spec: { protoSpec: new Uint8Array(spec) } };
}

function params(p: Partial<WatchParams> = {}): WatchParams {
  return {
    namespace: NS,
    type: TYPE,
    bootstrapContents: false,
    tailEvents: 0,
    query: EMPTY_QUERY,
    aggregated: false,
    bootstrapBookmark: false,
    apiVersion: 1,
    ...p,
  };
}

/** Reads `n` batches from a watch (bounded by a timeout so a broken watch fails the test, not hangs it). */
async function take(it: AsyncIterator<SimEvent[]>, n: number): Promise<SimEvent[][]> {
  const out: SimEvent[][] = [];
  for (let i = 0; i < n; i++) {
    const r = await Promise.race([
      it.next(),
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`no batch ${i} within 2s`)), 2000)),
    ]);
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

const types = (b: SimEvent[][]) => b.map((x) => x.map((e) => e.eventType));

describe('SimStore CRUD (docs/omni-wire.md 2.2, 2.3)', () => {
  it('versions start at 1 and increase by 1; created set on create; updated kept on create, set on update', () => {
    const { store, tick } = makeStore();
    const c = store.create(who, res('a', { updated: '2020-01-01T00:00:00Z' }), 'Ctrl');
    expect(c.metadata.version).toBe('1');
    expect(c.metadata.owner).toBe('Ctrl');
    expect(c.metadata.created).toBe('2026-08-01T10:00:00Z');
    expect(c.metadata.updated).toBe('2020-01-01T00:00:00Z');
    expect(store.create(who, res('b'), '').metadata.updated).toBe('1970-01-01T00:00:00Z');
    tick(1500);
    const u = store.update(who, c, 'Ctrl');
    expect(u.metadata.version).toBe('2');
    expect(u.metadata.created).toBe('2026-08-01T10:00:00Z');
    expect(u.metadata.updated).toBe('2026-08-01T10:00:01.500Z');
    expect(store.update(who, u, 'Ctrl').metadata.version).toBe('3');
  });

  it('Create: owner rule (Unknown "owner is already set") and AlreadyExists', () => {
    const { store } = makeStore();
    expect(() => store.create(who, res('a', { owner: 'X' }), '')).toThrow(
      expect.objectContaining({ grpcCode: 2, omniMessage: 'owner is already set' }),
    );
    expect(() => store.create(who, res('a', { owner: 'X' }), 'Y')).toThrow(expect.objectContaining({ grpcCode: 2 }));
    store.create(who, res('a', { owner: 'X' }), 'X');
    expect(() => store.create(who, res('a'), 'X')).toThrow(expect.objectContaining({ grpcCode: 6 }));
  });

  it('Update (etcd-backed kinds): NotFound, then version (9) before owner (7) before phase (3)', () => {
    const { store } = makeStore();
    expect(() => store.update(who, res('nope'), '')).toThrow(expect.objectContaining({ grpcCode: 5 }));
    const c = store.create(who, res('a'), 'Ctrl');
    const stale = { ...c, metadata: { ...c.metadata, version: '7' } };
    // wrong owner AND wrong version AND wrong phase: the version wins (etcd's order)
    expect(() => store.update(who, stale, 'Other', 'tearingDown')).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage:
          'failed to update: resource InfraMachines.omni.sidero.dev(infra-provider/a@1) update conflict: expected ' +
          "version '\\a', actual version '\\x01'",
      }),
    );
    expect(() => store.update(who, c, 'Other', 'tearingDown')).toThrow(
      expect.objectContaining({
        grpcCode: 7,
        omniMessage: 'failed to update: resource InfraMachines.omni.sidero.dev(infra-provider/a@1) is owned by "Ctrl"',
      }),
    );
    expect(() => store.update(who, stale, 'Ctrl', 'tearingDown')).toThrow(expect.objectContaining({ grpcCode: 9 }));
    expect(() => store.update(who, { ...c, metadata: { ...c.metadata, version: 'undefined' } }, 'Ctrl')).toThrow(
      expect.objectContaining({ grpcCode: 9 }),
    );
    expect(() => store.update(who, c, 'Ctrl', 'tearingDown')).toThrow(expect.objectContaining({ grpcCode: 3 }));
    expect(store.update(who, c, 'Ctrl', 'running').metadata.version).toBe('2');
  });

  it('Update stores the new owner from the resource and leaves nothing shared with the caller', () => {
    const { store } = makeStore();
    const c = store.create(who, res('a'), 'Ctrl');
    c.metadata.owner = 'New';
    c.metadata.finalizers.push('f');
    store.update(who, c, 'Ctrl');
    c.metadata.finalizers.push('mutated-after');
    c.spec.protoSpec[0] = 99;
    const g = store.get(who, c.metadata);
    expect(g.metadata.owner).toBe('New');
    expect(g.metadata.finalizers).toEqual(['f']);
    expect([...g.spec.protoSpec]).toEqual([1, 2]);
    g.metadata.labels['x'] = 'y';
    expect(store.get(who, c.metadata).metadata.labels).toEqual({});
  });

  it('Destroy: NotFound, owner, pending finalizers; phase not required', () => {
    const { store } = makeStore();
    expect(() => store.destroy(who, res('a').metadata, '')).toThrow(expect.objectContaining({ grpcCode: 5 }));
    store.create(who, res('a', { finalizers: ['f'] }), 'Ctrl');
    expect(() => store.destroy(who, res('a').metadata, 'x')).toThrow(expect.objectContaining({ grpcCode: 7 }));
    expect(() => store.destroy(who, res('a').metadata, 'Ctrl')).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage:
          'failed to destroy: resource InfraMachines.omni.sidero.dev(infra-provider/a@1) has pending finalizers &[f]',
      }),
    );
    store.create(who, res('b'), 'Ctrl');
    store.destroy(who, res('b').metadata, 'Ctrl');
    expect(() => store.get(who, res('b').metadata)).toThrow(expect.objectContaining({ grpcCode: 5 }));
  });

  it('Teardown returns destroy-readiness; already tearing down = no write and no owner check', () => {
    const { store } = makeStore();
    store.create(who, res('a', { finalizers: ['f'] }), 'Ctrl');
    const p = res('a').metadata;
    expect(() => store.teardown(who, p, 'Other')).toThrow(expect.objectContaining({ grpcCode: 7 }));
    expect(store.teardown(who, p, 'Ctrl')).toBe(false);
    expect(store.get(who, p).metadata).toMatchObject({ phase: 'tearingDown', version: '2' });
    expect(store.teardown(who, p, 'Other')).toBe(false);
    expect(store.get(who, p).metadata.version).toBe('2');
    store.create(who, res('b'), '');
    expect(store.teardown(who, res('b').metadata, '')).toBe(true);
  });

  it('TeardownAndDestroy waits for the finalizers, and honours the abort signal', async () => {
    const { store } = makeStore();
    const c = store.create(who, res('a', { finalizers: ['f1', 'f2'] }), 'Ctrl');
    let done = false;
    const p = store.teardownAndDestroy(who, c.metadata, 'Ctrl', new AbortController().signal).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(done).toBe(false);
    let cur = store.get(who, c.metadata);
    store.update(who, { ...cur, metadata: { ...cur.metadata, finalizers: ['f2'] } }, 'Ctrl');
    await new Promise((r) => setTimeout(r, 10));
    expect(done).toBe(false);
    cur = store.get(who, c.metadata);
    store.update(who, { ...cur, metadata: { ...cur.metadata, finalizers: [] } }, 'Ctrl');
    await p;
    expect(store.peek(c.metadata)).toBeUndefined();

    store.create(who, res('b', { finalizers: ['f'] }), '');
    const ac = new AbortController();
    const q = store.teardownAndDestroy(who, res('b').metadata, '', ac.signal);
    ac.abort();
    await expect(q).rejects.toMatchObject({ grpcCode: 1 });
    expect(store.peek(res('b').metadata)?.metadata.phase).toBe('tearingDown');
  });

  it('List is sorted by ID and filtered by kind and query', () => {
    const { store } = makeStore();
    for (const id of ['c', 'a', 'b']) store.create(who, res(id, { labels: id === 'b' ? {} : { k: 'v' } }), '');
    store.create(who, { ...res('z'), metadata: { ...res('z').metadata, type: 'Other' } }, '');
    expect(store.list(who, NS, TYPE, EMPTY_QUERY).map((r) => r.metadata.id)).toEqual(['a', 'b', 'c']);
    const q = { labelQueries: [[{ key: 'k', op: Op.EQUAL, value: ['v'], invert: false }]], idRegexp: '' };
    expect(store.list(who, NS, TYPE, q).map((r) => r.metadata.id)).toEqual(['a', 'c']);
    expect(() => store.list(who, NS, TYPE, { labelQueries: [], idRegexp: '(' })).toThrow(
      expect.objectContaining({ grpcCode: 3 }),
    );
  });
});

describe('SimStore watch (docs/omni-wire.md 2.7)', () => {
  it('kind watch bootstrap: CREATED each, no bookmark; BOOTSTRAPPED tombstone and live events with one', async () => {
    const { store } = makeStore();
    store.create(who, res('b'), '');
    store.create(who, res('a'), '');
    const ac = new AbortController();
    const it = store.watch(who, params({ bootstrapContents: true }), ac.signal)[Symbol.asyncIterator]();
    const first = await take(it, 3);
    expect(types(first)).toEqual([[EventType.CREATED], [EventType.CREATED], [EventType.BOOTSTRAPPED]]);
    expect(first.map((b) => b[0]?.resource.metadata.id)).toEqual(['a', 'b', '']);
    expect(first[2]?.[0]?.resource.metadata.version).toBe('undefined');
    expect(first.map((b) => b[0]?.bookmark === undefined)).toEqual([true, true, false]);
    // The marker is a COSI tombstone: created and updated both set, to the same time.
    expect(first[2]?.[0]?.resource.metadata.created).toBe('2026-08-01T10:00:00Z');
    expect(first[2]?.[0]?.resource.metadata.updated).toBe(first[2]?.[0]?.resource.metadata.created);
    expect(first[2]?.[0]?.bookmark?.length).toBe(8); // etcd's revision
    const cur = store.get(who, res('a').metadata);
    store.update(who, cur, '');
    const [upd] = await take(it, 1);
    expect(upd?.[0]).toMatchObject({
      eventType: EventType.UPDATED,
      old: { metadata: { version: '1' } },
      resource: { metadata: { version: '2' } },
    });
    expect(upd?.[0]?.bookmark?.length).toBe(8);
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });

  it('aggregated: bootstrap one batch, bootstrap_bookmark a NOOP batch; api_version 0: no BOOTSTRAPPED', async () => {
    const { store } = makeStore();
    store.create(who, res('a'), '');
    const ac = new AbortController();
    const it = store
      .watch(who, params({ bootstrapContents: true, aggregated: true, bootstrapBookmark: true }), ac.signal)
      [Symbol.asyncIterator]();
    const boot = await take(it, 2);
    expect(types(boot)).toEqual([[EventType.CREATED, EventType.BOOTSTRAPPED], [EventType.NOOP]]);
    expect(boot.flat().map((e) => e.bookmark !== undefined)).toEqual([false, true, true]);
    store.create(who, res('b'), '');
    store.create(who, res('c'), '');
    expect(types(await take(it, 1))).toEqual([[EventType.CREATED, EventType.CREATED]]);
    const it0 = store
      .watch(
        who,
        params({ bootstrapContents: true, aggregated: true, bootstrapBookmark: true, apiVersion: 0 }),
        ac.signal,
      )
      [Symbol.asyncIterator]();
    expect(types(await take(it0, 2))).toEqual([
      [EventType.CREATED, EventType.CREATED, EventType.CREATED],
      [EventType.NOOP],
    ]);
    ac.abort();
  });

  it('single-resource watch: CREATED or a DESTROYED tombstone first; bad options Unimplemented/Unknown', async () => {
    const { store } = makeStore();
    store.create(who, res('a'), '');
    const ac = new AbortController();
    const a = store.watch(who, params({ id: 'a' }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(a, 1))[0]?.[0]).toMatchObject({
      eventType: EventType.CREATED,
      resource: { metadata: { id: 'a', version: '1' } },
    });
    const missing = store.watch(who, params({ id: 'zz' }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(missing, 1))[0]?.[0]).toMatchObject({
      eventType: EventType.DESTROYED,
      resource: { metadata: { id: 'zz', version: 'undefined' } },
    });
    store.create(who, res('b'), '');
    store.destroy(who, res('a').metadata, '');
    expect((await take(a, 1))[0]?.[0]).toMatchObject({
      eventType: EventType.DESTROYED,
      resource: { metadata: { id: 'a' } },
    });
    ac.abort();
    expect(() => store.watch(who, params({ id: 'a', bootstrapContents: true }), ac.signal)).toThrow(
      expect.objectContaining({ grpcCode: 12 }),
    );
    const lq = { labelQueries: [[{ key: 'k', op: Op.EXISTS, value: [], invert: false }]], idRegexp: '' };
    expect(() => store.watch(who, params({ id: 'a', query: lq }), ac.signal)).toThrow(
      expect.objectContaining({ grpcCode: 12 }),
    );
    expect(() => store.watch(who, params({ bootstrapContents: true, tailEvents: 1 }), ac.signal)).toThrow(
      expect.objectContaining({ grpcCode: 2 }),
    );
    expect(() =>
      store.watch(who, params({ bootstrapContents: true, startFromBookmark: store.currentBookmark() }), ac.signal),
    ).toThrow(expect.objectContaining({ grpcCode: 2 }));
    expect(() =>
      store.watch(who, params({ tailEvents: 1, startFromBookmark: store.currentBookmark() }), ac.signal),
    ).toThrow(expect.objectContaining({ grpcCode: 2 }));
    expect(() => store.watch(who, params({ tailEvents: 1 }), ac.signal)).toThrow(
      expect.objectContaining({ grpcCode: 2 }),
    );
    expect(() => store.watch(who, params({ namespace: 'ephemeral', tailEvents: 1 }), ac.signal)).not.toThrow();
  });

  it('etcd kinds: resume at a revision, skip its event; bad length FailedPrecondition, compacted ERRORED', async () => {
    const { store } = makeStore({ historyCapacity: 5 });
    const ac = new AbortController();
    const it = store.watch(who, params(), ac.signal)[Symbol.asyncIterator]();
    store.create(who, res('a'), '');
    store.create(who, res('b'), '');
    store.create(who, res('c'), '');
    const seen = await take(it, 3);
    const bm = seen[0]?.[0]?.bookmark as Uint8Array;
    const resumed = store.watch(who, params({ startFromBookmark: bm }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(resumed, 2)).map((b) => b[0]?.resource.metadata.id)).toEqual(['b', 'c']);
    expect(() => store.watch(who, params({ startFromBookmark: new Uint8Array(3) }), ac.signal)).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage: `failed to watchKind "${TYPE}(${NS}/@undefined)": invalid bookmark length: 3`,
      }),
    );
    expect(() => store.watch(who, params({ id: 'a', startFromBookmark: new Uint8Array(16) }), ac.signal)).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage: `failed to watch "${TYPE}(${NS}/a@undefined)": invalid bookmark length: 16`,
      }),
    );
    // A revision from the future waits for it, as etcd does.
    const future = new Uint8Array(8);
    future[7] = 5; // after a, b, c: revision 5 is the next write but one
    const waiting = store.watch(who, params({ startFromBookmark: future }), ac.signal)[Symbol.asyncIterator]();
    for (const id of ['d', 'e', 'f', 'g', 'h']) store.create(who, res(id), '');
    expect((await take(waiting, 3)).map((b) => b[0]?.resource.metadata.id)).toEqual(['f', 'g', 'h']);
    // History kept: 5 events; b's bookmark needs c..h (6): compacted, refused once established.
    const compacted = store.watch(who, params({ startFromBookmark: bm }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(compacted, 1))[0]).toMatchObject([
      { eventType: EventType.ERRORED, error: 'etcdserver: mvcc: required revision has been compacted' },
    ]);
    expect((await compacted.next()).done).toBe(true);
    ac.abort();
  });

  it('in-memory kinds: cookie + position; foreign, too old or future: "invalid watch bookmark"', async () => {
    const { store } = makeStore({ historyCapacity: 2 });
    const ac = new AbortController();
    const ep = { namespace: 'ephemeral' };
    const eph = (id: string): Resource => {
      const r = res(id);
      r.metadata.namespace = 'ephemeral';
      return r;
    };
    const it = store.watch(who, params(ep), ac.signal)[Symbol.asyncIterator]();
    store.create(who, eph('a'), '');
    const [first] = await take(it, 1);
    const bm = first?.[0]?.bookmark as Uint8Array;
    expect(bm.length).toBe(16);
    const invalid = expect.objectContaining({ grpcCode: 9, omniMessage: 'invalid watch bookmark' });
    expect(() => store.watch(who, params({ ...ep, startFromBookmark: new Uint8Array(8) }), ac.signal)).toThrow(invalid);
    const foreign = new Uint8Array(bm);
    foreign[0] = (foreign[0] ?? 0) ^ 0xff;
    expect(() => store.watch(who, params({ ...ep, startFromBookmark: foreign }), ac.signal)).toThrow(invalid);
    const future = new Uint8Array(bm);
    future[15] = (future[15] ?? 0) + 1;
    expect(() => store.watch(who, params({ ...ep, startFromBookmark: future }), ac.signal)).toThrow(invalid);
    for (const id of ['b', 'c', 'd']) store.create(who, eph(id), '');
    expect(() => store.watch(who, params({ ...ep, startFromBookmark: bm }), ac.signal)).toThrow(invalid);
    ac.abort();
  });

  it('keeps exactly the last historyCapacity events (bookmarks inside resume, older ones refused)', async () => {
    const { store } = makeStore({ historyCapacity: 5 });
    const ac = new AbortController();
    const bookmarks: Uint8Array[] = [];
    for (let i = 0; i < 23; i++) {
      store.create(who, res(`r${i}`), '');
      bookmarks.push(store.currentBookmark());
    }
    // Bookmark i is the position right after event i; events i+1.. are replayed from it.
    const resumed = store.watch(who, params({ startFromBookmark: bookmarks[18] }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(resumed, 4)).flat().map((e) => e.resource.metadata.id)).toEqual(['r19', 'r20', 'r21', 'r22']);
    const old = store.watch(who, params({ startFromBookmark: bookmarks[16] }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(old, 1))[0]?.[0]?.eventType).toBe(EventType.ERRORED);
    ac.abort();
  });

  it('events are not copies the store reads: a watcher changing what it got leaves the store as it was', async () => {
    const { store } = makeStore();
    const ac = new AbortController();
    const it = store.watch(who, params(), ac.signal)[Symbol.asyncIterator]();
    store.create(who, res('a', { finalizers: ['f'] }), '');
    const [batch] = await take(it, 1);
    const got = batch?.[0]?.resource as Resource;
    got.metadata.finalizers.push('changed');
    got.spec.protoSpec[0] = 99;
    expect(store.peek(got.metadata)?.metadata.finalizers).toEqual(['f']);
    expect([...(store.peek(got.metadata)?.spec.protoSpec ?? [])]).toEqual([1, 2]);
    ac.abort();
  });

  it('query match transitions become CREATED/DESTROYED', async () => {
    const { store } = makeStore();
    const q = { labelQueries: [[{ key: 'k', op: Op.EXISTS, value: [], invert: false }]], idRegexp: '' };
    const ac = new AbortController();
    const it = store.watch(who, params({ query: q }), ac.signal)[Symbol.asyncIterator]();
    let r = store.create(who, res('a'), '');
    r = store.update(who, { ...r, metadata: { ...r.metadata, labels: { k: '1' } } }, '');
    r = store.update(who, { ...r, metadata: { ...r.metadata, labels: { k: '2' } } }, '');
    store.update(who, { ...r, metadata: { ...r.metadata, labels: {} } }, '');
    const got = await take(it, 3);
    expect(types(got)).toEqual([[EventType.CREATED], [EventType.UPDATED], [EventType.DESTROYED]]);
    expect(got[0]?.[0]?.old).toBeUndefined();
    ac.abort();
  });

  it('a watch that falls behind gets ERRORED "buffer overrun" and ends', async () => {
    const { store } = makeStore({ watchBufferCapacity: 2 });
    const ac = new AbortController();
    const it = store.watch(who, params(), ac.signal)[Symbol.asyncIterator]();
    for (const id of ['a', 'b', 'c', 'd']) store.create(who, res(id), '');
    const got = await take(it, 2);
    expect(got[0]?.[0]).toMatchObject({ eventType: EventType.ERRORED, error: 'buffer overrun' });
    expect(got).toHaveLength(1);
  });

  it('restart breaks open watches, refuses bookmarks issued before; onEvent sees every change in order', async () => {
    const { store } = makeStore();
    const seen: string[] = [];
    const off = store.onEvent((e) => {
      seen.push(`${e.eventType}:${e.resource.metadata.id}`);
      // a listener writing to the store (like Omni's controllers) does not reorder events
      if (e.resource.metadata.id === 'a' && e.eventType === EventType.CREATED) store.create(who, res('a2'), '');
    });
    const ac = new AbortController();
    const it = store.watch(who, params(), ac.signal)[Symbol.asyncIterator]();
    store.create(who, res('a'), '');
    store.create(who, res('b'), '');
    expect(seen).toEqual(['0:a', '0:a2', '0:b']);
    off();
    const bm = (await take(it, 1))[0]?.[0]?.bookmark as Uint8Array;
    store.restart();
    await expect(it.next()).rejects.toMatchObject({ code: 'SIM_STREAM_BROKEN' });
    // etcd's history before the restart is compacted: the old revision is refused once the watch is up,
    // one issued after the restart resumes.
    const old = store.watch(who, params({ startFromBookmark: bm }), ac.signal)[Symbol.asyncIterator]();
    expect((await take(old, 1))[0]?.[0]).toMatchObject({
      eventType: EventType.ERRORED,
      error: 'etcdserver: mvcc: required revision has been compacted',
    });
    const fresh = store
      .watch(who, params({ startFromBookmark: store.currentBookmark() }), ac.signal)
      [Symbol.asyncIterator]();
    store.create(who, res('c'), '');
    expect((await take(fresh, 1))[0]?.[0]?.resource.metadata.id).toBe('c');
    ac.abort();
    expect(store.get(who, res('b').metadata).metadata.version).toBe('1');
  });

  it('bumpVersion is a no-op update seen as UPDATED', () => {
    const { store } = makeStore();
    const c = store.create(who, res('a', { labels: { k: 'v' } }), 'Ctrl');
    expect(store.bumpVersion(c.metadata)).toBe(true);
    const g = store.get(who, c.metadata);
    expect(g.metadata.version).toBe('2');
    expect(g.metadata.labels).toEqual({ k: 'v' });
    expect(() => store.update(who, c, 'Ctrl')).toThrow(expect.objectContaining({ grpcCode: 9 }));
  });
});
