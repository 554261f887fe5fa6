// The provider's cache of one kind (src/provider/read/cache.ts): List once the watch is established, the
// events that came meanwhile over it, later ones as they come; re-listed when the bookmark is refused.
// Absence from it (its List, its watch) is never evidence (design rule 10): a no-finalizers wait
// reads a resource by its ID first, and only live events, Gets and this run's writes name an ID.

import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../../src/omni-api/errors.js';
import { TransportError } from '../../../src/omni-client/errors.js';
import { LABEL_INFRA_PROVIDER_ID, newMetadata, type Pointer, type Resource } from '../../../src/omni-api/resource.js';
import type { QueryOptions, State, WatchEvent, WatchKindOptions } from '../../../src/omni-api/state.js';
import { ProviderCache } from '../../../src/provider/read/cache.js';

const ID = 'kv';
const ptr: Pointer = { namespace: 'infra-provider', type: 'MachineRequestStatuses.omni.sidero.dev', id: 'r1' };

function res(version: string, finalizers: string[], id = ptr.id, provider = ID): Resource {
  return {
    metadata: newMetadata(
      { ...ptr, id },
      { version, phase: 'tearingDown', finalizers, labels: { [LABEL_INFRA_PROVIDER_ID]: provider } },
    ),
    spec: { protoSpec: new Uint8Array() },
  };
}
const tombstone = (): Resource => ({
  metadata: newMetadata({ ...ptr, id: '' }),
  spec: { protoSpec: new Uint8Array() },
});
const noop: WatchEvent = { type: 'noop', resource: tombstone(), bookmark: new Uint8Array(8) };

/**
 * A State whose one kind watch yields what a test pushes (and throws what it fails with); List and Get answer from
 * functions.
 */
class Scripted {
  readonly calls = { list: 0, get: 0, watch: 0 };
  /** Watches open now. */
  open = 0;
  /** The options of each watch opened, of each List. */
  readonly asked: (WatchKindOptions | undefined)[] = [];
  readonly listAsked: (QueryOptions | undefined)[] = [];
  private queue: (WatchEvent[] | Error)[] = [];
  private wake: (() => void) | undefined;
  onReset: (() => void) | undefined;
  listed: () => Resource[] = () => [];
  stored: () => Resource | undefined = () => undefined;
  /** Holds the List's answer until released. */
  listGate: Promise<void> = Promise.resolve();

  push(b: WatchEvent[] | Error): void {
    this.queue.push(b);
    this.wake?.();
  }

  /**
   * What the test pushes, as the client's watch delivers it: a batch the consumer does not read now
   * (its `skip`) is counted (`onSkipped`), not delivered.
   */
  private async *deliver(opts: WatchKindOptions | undefined): AsyncGenerator<WatchEvent[]> {
    for (;;) {
      if (opts?.signal?.aborted) return;
      const next = this.queue.shift();
      if (next instanceof Error) throw next;
      if (next) {
        if (opts?.skip?.()) opts.onSkipped?.();
        else yield next;
        continue;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        opts?.signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  readonly state = {
    watchKind: (_ns: string, _type: string, opts?: WatchKindOptions) => {
      this.onReset = opts?.onReset;
      this.asked.push(opts);
      const events = async function* (self: Scripted) {
        self.calls.watch++;
        self.open++;
        try {
          yield* self.deliver(opts);
        } finally {
          self.open--;
        }
      };
      return { [Symbol.asyncIterator]: () => events(this) };
    },
    list: async (_ns: string, _type: string, opts?: QueryOptions) => {
      this.calls.list++;
      this.listAsked.push(opts);
      await this.listGate;
      return this.listed().map((r) => structuredClone(r));
    },
    get: async () => {
      this.calls.get++;
      const r = this.stored();
      if (!r) throw new NotFoundError('not found');
      return structuredClone(r);
    },
  } as unknown as State;
}

const tick = (ms = 10) => new Promise((r) => setTimeout(r, ms));
const cacheOn = (s: Scripted, o: { live?: boolean; establishMs?: number } = {}) =>
  new ProviderCache(s.state, { providerId: ID, live: o.live ?? true, establishMs: o.establishMs ?? 5_000 });

describe('the cache of a kind: List then Watch', () => {
  it('lists once the watch is established, applies what came meanwhile over the List in order, then more', async () => {
    const s = new Scripted();
    let release!: () => void;
    s.listGate = new Promise((r) => {
      release = r;
    });
    s.listed = () => [res('3', ['MachineRequestStatusCleanupController'])];
    const c = cacheOn(s);
    const listing = c.list(ptr.namespace, ptr.type);
    await tick();
    expect(s.calls.list).toBe(0);
    s.push([noop]);
    await tick();
    expect(s.calls.list).toBe(1);
    // While the List is read: an update it may or may not show, and one it cannot.
    s.push([
      { type: 'updated', resource: res('3', ['MachineRequestStatusCleanupController']) },
      { type: 'updated', resource: res('4', ['X']) },
    ]);
    await tick();
    release();
    expect((await listing).map((r) => [r.metadata.version, r.metadata.finalizers])).toEqual([['4', ['X']]]);
    s.push([{ type: 'updated', resource: res('5', []) }]);
    await tick();
    expect(c.current(ptr)?.metadata.version).toBe('5');
    expect(s.calls).toEqual({ list: 1, get: 0, watch: 1 });
    // Listed, not bootstrapped; an UPDATED event's previous state is never read (left undecoded).
    expect(s.asked[0]).toMatchObject({ bootstrapContents: false, previous: false });
    // Each listed resource is slimmed as it comes (what the caches keep of it: slim.ts).
    const kept = s.listAsked[0]?.keep?.(res('6', ['MachineRequestStatusCleanupController']));
    expect(kept !== undefined && Object.isFrozen(kept.metadata.finalizers)).toBe(true);
    c.close();
  });

  it('an event older than what the cache holds changes nothing; a DESTROYED event removes it and is gone', async () => {
    const s = new Scripted();
    s.listed = () => [res('5', ['A'])];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    s.push([{ type: 'updated', resource: res('4', []) }]);
    await tick();
    expect(c.finalizersOf(ptr)).toEqual(['A']);
    s.push([{ type: 'destroyed', resource: res('6', []) }]);
    await tick();
    expect(c.current(ptr)).toBeUndefined();
    expect(c.finalizersOf(ptr)).toBe('gone');
    expect(c.isGone(ptr)).toBe(true);
    c.close();
  });

  it('no sign the watch is established (Omni < 1.0 filters that NOOP): lists after establishMs anyway', async () => {
    const s = new Scripted();
    s.listed = () => [res('2', [])];
    const c = cacheOn(s, { establishMs: 50 });
    const t0 = Date.now();
    expect((await c.list(ptr.namespace, ptr.type)).length).toBe(1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(40);
    c.close();
  });

  it("`plan`'s cache lists once and watches nothing", async () => {
    const s = new Scripted();
    s.listed = () => [res('2', [])];
    const c = cacheOn(s, { live: false });
    await c.list(ptr.namespace, ptr.type);
    await c.list(ptr.namespace, ptr.type);
    expect(s.calls).toEqual({ list: 1, get: 0, watch: 0 });
    c.close();
  });

  it('a bookmark refused: later events held, the kind listed again once the watch is back, then applied', async () => {
    const s = new Scripted();
    s.listed = () => [res('2', ['A'])];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    s.listed = () => [res('7', ['B']), res('1', [], 'r2')];
    s.onReset!();
    s.push([noop, { type: 'updated', resource: res('8', []) }]);
    const again = await c.list(ptr.namespace, ptr.type);
    expect(again.map((r) => `${r.metadata.id}@${r.metadata.version}`).sort()).toEqual(['r1@8', 'r2@1']);
    expect(s.calls.list).toBe(2);
    c.close();
  });

  it("keeps only ours: another provider's resource not kept; one that stops being ours leaves (not gone)", async () => {
    const s = new Scripted();
    s.listed = () => [res('2', []), res('2', [], 'o1', 'kv-2')];
    const c = cacheOn(s);
    s.push([noop]);
    expect((await c.list(ptr.namespace, ptr.type)).map((r) => r.metadata.id)).toEqual(['r1']);
    s.push([{ type: 'updated', resource: res('3', [], 'r1', 'KV') }]);
    await tick();
    expect(c.current(ptr)).toBeUndefined();
    expect(c.isGone(ptr)).toBe(false);
    c.close();
  });

  it('a failed watch rejects its waits; the next query starts the kind again', async () => {
    const s = new Scripted();
    s.listed = () => [res('2', ['A'])];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    const waiting = c.wait(ptr, 'no-finalizers', 5_000);
    s.push(new TransportError('a watch that cannot resume'));
    await expect(waiting).rejects.toThrow('cannot resume');
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    expect(s.calls).toMatchObject({ list: 2, watch: 2 });
    c.close();
  });
});

describe('a kind the run does not follow: its watch sleeps until it is read', () => {
  /** A cache of the kind, listed at version 3 with finalizer A, then not followed by the run. */
  async function unfollowed(s: Scripted): Promise<ProviderCache> {
    s.listed = () => [res('3', ['A'])];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    c.follow([]);
    return c;
  }

  /** The same, after an event nobody read (version 4, finalizer B): its watch is closed. */
  async function asleep(s: Scripted): Promise<ProviderCache> {
    const c = await unfollowed(s);
    s.push([{ type: 'updated', resource: res('4', ['B']) }]);
    await tick();
    expect(s.open).toBe(0);
    return c;
  }

  it('the first event nobody reads closes its watch; a query opens a new one and lists the kind again', async () => {
    const s = new Scripted();
    // Not read (what the cache holds is stale), and no more events come over the wire.
    const c = await asleep(s);
    expect(c.current(ptr)?.metadata.version).toBe('3');
    expect(s.calls).toEqual({ list: 1, get: 0, watch: 1 });
    s.listed = () => [res('5', [])];
    const listing = c.list(ptr.namespace, ptr.type);
    await tick();
    expect(s.open).toBe(1);
    s.push([noop]);
    expect((await listing).map((r) => r.metadata.version)).toEqual(['5']);
    // Followed again until the run says otherwise: its events are read.
    s.push([{ type: 'updated', resource: res('6', ['C']) }]);
    await tick();
    expect(c.current(ptr)?.metadata.finalizers).toEqual(['C']);
    expect(s.calls).toEqual({ list: 2, get: 0, watch: 2 });
    c.close();
  });

  it('a wait on it opens a new watch and lists it: released on what the List shows', async () => {
    const s = new Scripted();
    const c = await asleep(s);
    s.listed = () => [res('5', [])];
    const waiting = c.wait(ptr, 'no-finalizers', 5_000, '4');
    await tick();
    expect(s.open).toBe(1);
    s.push([noop]);
    expect(await waiting).toBe('released');
    expect(s.calls).toEqual({ list: 2, get: 0, watch: 2 });
    c.close();
  });

  it('followed again by the run: its watch opens again at once, and the kind is listed', async () => {
    const s = new Scripted();
    const c = await asleep(s);
    s.listed = () => [res('4', ['B'])];
    c.follow('all');
    await tick();
    expect(s.open).toBe(1);
    s.push([noop]);
    await tick();
    expect(c.current(ptr)?.metadata.version).toBe('4');
    expect(s.calls).toEqual({ list: 2, get: 0, watch: 2 });
    c.close();
    await tick();
    expect(s.open).toBe(0);
  });

  it('while nothing comes, its watch stays open; one waited on reads its events', async () => {
    const s = new Scripted();
    const c = await unfollowed(s);
    await tick();
    expect(s.open).toBe(1);
    const waiting = c.wait(ptr, 'no-finalizers', 5_000, '4');
    s.push([{ type: 'updated', resource: res('4', []) }]);
    expect(await waiting).toBe('released');
    expect(s.calls).toEqual({ list: 1, get: 0, watch: 1 });
    c.close();
  });
});

describe('the cache: evidence (design rules 4 and 10)', () => {
  it("names an ID by its live events, a Get that found it and this run's writes, not the List's contents", async () => {
    const s = new Scripted();
    s.listed = () => [res('3', ['A']), res('3', ['A'], 'r2')];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    expect(c.namedById(ptr)).toBe(false);
    s.push([{ type: 'updated', resource: res('4', ['A']) }]);
    await tick();
    expect(c.namedById(ptr)).toBe(true);
    const r2 = { ...ptr, id: 'r2' };
    expect(c.namedById(r2)).toBe(false);
    c.observe(res('4', [], 'r2'));
    expect(c.namedById(r2)).toBe(true);
    c.close();
  });

  it('absent from List and watch: a no-finalizers wait Gets it by ID; NotFound is gone, names no ID', async () => {
    const s = new Scripted();
    const c = cacheOn(s);
    s.push([noop]);
    await expect(c.wait(ptr, 'no-finalizers', 5_000)).resolves.toBe('gone');
    expect(s.calls.get).toBe(1);
    expect(c.namedById(ptr)).toBe(false);
    c.close();
  });

  it('absent, and its Get finds it still held: the wait goes on; found released, it is released', async () => {
    const s = new Scripted();
    s.stored = () => res('2', ['ConfigPatchRequestController']);
    const c = cacheOn(s);
    s.push([noop]);
    await expect(c.wait(ptr, 'no-finalizers', 300)).resolves.toBe('timeout');
    expect(s.calls.get).toBe(1);
    expect(c.namedById(ptr)).toBe(true);
    c.close();
    const free = new Scripted();
    free.stored = () => res('2', []);
    const c2 = cacheOn(free);
    free.push([noop]);
    await expect(c2.wait(ptr, 'no-finalizers', 5_000)).resolves.toBe('released');
    c2.close();
  });

  it('a gone wait (a released parent, only pacing the next pass) ends on the absence without a read', async () => {
    const s = new Scripted();
    const c = cacheOn(s);
    s.push([noop]);
    await expect(c.wait(ptr, 'gone', 5_000)).resolves.toBe('gone');
    expect(s.calls.get).toBe(0);
    c.close();
  });

  it('before the List, only evidence ends a wait: a released event or a DESTROYED one', async () => {
    const s = new Scripted();
    let release!: () => void;
    s.listGate = new Promise((r) => {
      release = r;
    });
    const c = cacheOn(s);
    const waiting = c.wait(ptr, 'gone', 5_000);
    s.push([noop, { type: 'destroyed', resource: res('9', []) }]);
    await tick();
    // Held with the List's answer still out: the DESTROYED event is applied once it is in.
    release();
    await expect(waiting).resolves.toBe('gone');
    c.close();
  });

  it('an answer older than a watched DESTROYED (late answer) does not revive it; the ID re-created does', async () => {
    const s = new Scripted();
    s.listed = () => [res('3', ['kv.X'])];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    s.push([{ type: 'destroyed', resource: res('4', []) }]);
    await tick();
    c.observe(res('4', []));
    expect(c.current(ptr)).toBeUndefined();
    expect(c.isGone(ptr)).toBe(true);
    await expect(c.wait(ptr, 'gone', 1_000)).resolves.toBe('gone');
    s.push([{ type: 'created', resource: res('1', ['kv.X']) }]);
    await tick();
    expect(c.current(ptr)?.metadata.version).toBe('1');
    c.close();
  });

  it("this run's Destroy: gone at once; an earlier event (its finalizer removal) does not bring it back", async () => {
    const s = new Scripted();
    s.listed = () => [res('3', ['kv.X'])];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    c.observe(res('4', []));
    c.gone(ptr);
    s.push([{ type: 'updated', resource: res('4', []) }]);
    await tick();
    expect(c.current(ptr)).toBeUndefined();
    expect(c.isGone(ptr)).toBe(true);
    // Its DESTROYED event, then the ID created anew: kept again.
    s.push([
      { type: 'destroyed', resource: res('4', []) },
      { type: 'created', resource: res('1', ['kv.X']) },
    ]);
    await tick();
    expect(c.current(ptr)?.metadata.version).toBe('1');
    c.close();
  });

  it('no limit (--wait --timeout 0): a wait never times out: held, it waits; released later, released', async () => {
    const s = new Scripted();
    s.listed = () => [res('3', ['MachineRequestStatusCleanupController'])];
    const c = cacheOn(s);
    s.push([noop]);
    const waiting = c.wait(ptr, 'no-finalizers', Number.POSITIVE_INFINITY, '3');
    await tick(50);
    s.push([{ type: 'updated', resource: res('4', []) }]);
    await expect(waiting).resolves.toBe('released');
    c.close();
  });

  it('finalizersOf: what was seen last, gone after a DESTROYED event, unknown for a kind not read', async () => {
    const s = new Scripted();
    s.listed = () => [res('3', ['A', 'B']), res('3', ['A', 'B'], 'r2')];
    const c = cacheOn(s);
    s.push([noop]);
    await c.list(ptr.namespace, ptr.type);
    s.push([{ type: 'updated', resource: res('4', ['B']) }]);
    s.push([{ type: 'destroyed', resource: res('5', [], 'r2') }]);
    await tick();
    expect(c.finalizersOf(ptr)).toEqual(['B']);
    expect(c.finalizersOf({ ...ptr, id: 'r2' })).toBe('gone');
    expect(c.finalizersOf({ ...ptr, type: 'Other.omni.sidero.dev' })).toBeUndefined();
    expect(s.calls.get).toBe(0);
    c.close();
  });
});
