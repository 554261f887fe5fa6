// pressure.ts: the adaptive window of writes in flight (shrinks on back-pressure, grows back,
// honours Retry-After, bounded), the re-read verdicts of a write of unknown outcome (Update by its
// version, Destroy by a Get answering NotFound, Create by a Get of its ID), and the decorator's loop
// over a scripted backend: what is sent again, what is not, and where it stops.

import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  AlreadyExistsError,
  DeadlineExceededError,
  FailedPreconditionError,
  NotFoundError,
  PermissionDeniedError,
  ResourceExhaustedError,
  UnavailableError,
} from '../../../src/omni-api/errors.js';
import {
  DeadlineReachedError,
  ThrottledError,
  TransportError,
  WriteTooLargeError,
} from '../../../src/omni-client/errors.js';
import { exitCodeFor } from '../../../src/exit-codes.js';
import {
  observeWrite,
  type DeferringOptions,
  type WriteIntent,
  type WriteObserver,
} from '../../../src/omni-client/write/observer.js';
import {
  classifyWriteFailure,
  createVerdict,
  destroyVerdict,
  updateVerdict,
} from '../../../src/omni-client/write/verdict.js';
import { withBackPressure } from '../../../src/omni-client/write/pressure.js';
import { WriteWindow, type Ticket } from '../../../src/omni-client/write/window.js';
import { cloneResource, newMetadata, type Pointer, type Resource } from '../../../src/omni-api/resource.js';
import type { CallOptions, CoreState } from '../../../src/omni-api/state.js';
import { wrapCore } from '../../../src/omni-client/wrap.js';

const P: Pointer = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' };
const stored = (version: string, over: Partial<Resource['metadata']> = {}, spec = [8, 1]): Resource => ({
  metadata: newMetadata(P, {
    version,
    owner: 'InfraMachineController',
    phase: 'tearingDown',
    finalizers: ['bm.A', 'Other'],
    labels: { a: '1' },
    ...over,
  }),
  spec: { protoSpec: new Uint8Array(spec) },
});
/** What an Update removing bm.A sends: read at `version`. */
const removal = (version: string): Resource => {
  const r = cloneResource(stored(version));
  r.metadata.finalizers = ['Other'];
  return r;
};
/** What Omni stores when that Update is applied. */
const applied = (version: string): Resource => ({
  ...removal(version),
  metadata: { ...removal(version).metadata, version: String(Number(version) + 1) },
});

afterEach(() => {
  vi.useRealTimers();
});

describe('the window of writes in flight', () => {
  /** n places that are free now (each would not wait). */
  const take = async (w: WriteWindow, n: number): Promise<Ticket[]> => {
    const out: Ticket[] = [];
    for (let i = 0; i < n; i++) {
      expect(w.wouldWait()).toBe(false);
      out.push(await w.acquire());
    }
    return out;
  };

  it('starts at the configured most, halves on a signal, once per round, never below the fewest', async () => {
    const w = new WriteWindow({ max: 16 });
    const round0 = await take(w, 16);
    expect(round0).toHaveLength(16);
    expect(w.wouldWait()).toBe(true);
    // 16 writes in flight answered DeadlineExceeded together: one halving, not sixteen.
    for (const t of round0.slice(0, 8)) w.release(t, { kind: 'signal' });
    expect(w.size).toBe(8);
    for (const t of round0.slice(8)) w.release(t, { kind: 'signal' });
    expect(w.size).toBe(8);
    // Each later round halves again, down to the fewest.
    const sizes: number[] = [];
    for (let i = 0; i < 10; i++) {
      const [t] = await take(w, 1);
      w.release(t!, { kind: 'signal' });
      sizes.push(w.size);
    }
    expect(sizes).toEqual([4, 2, 1, 1, 1, 1, 1, 1, 1, 1]);
    expect(w.lowest).toBe(1);
  });

  it('grows back by one per window of successes, up to the most', async () => {
    const w = new WriteWindow({ max: 16, min: 2 });
    for (let i = 0; i < 5; i++) {
      const [t] = await take(w, 1);
      w.release(t!, { kind: 'signal' });
    }
    expect(w.size).toBe(2);
    let successes = 0;
    const seen = [w.size];
    for (let i = 0; i < 1000 && w.size < 16; i++) {
      const [t] = await take(w, 1);
      w.release(t!, { kind: 'ok' });
      successes++;
      if (seen.at(-1) !== w.size) seen.push(w.size);
    }
    expect(seen).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    // 2 + 3 + ... + 15 successes: additive increase of one per window's worth.
    expect(successes).toBe(119);
    const [t] = await take(w, 1);
    w.release(t!, { kind: 'ok' });
    expect(w.size).toBe(16);
  });

  it('a write waits its turn when the window is full, FIFO', async () => {
    const w = new WriteWindow({ max: 2 });
    const [a, b] = await take(w, 2);
    const order: string[] = [];
    const c = w.acquire().then((t) => {
      order.push('c');
      return t;
    });
    const d = w.acquire().then((t) => {
      order.push('d');
      return t;
    });
    await Promise.resolve();
    expect(order).toEqual([]);
    w.release(a!, { kind: 'ok' });
    await c;
    expect(order).toEqual(['c']);
    w.release(b!, { kind: 'ok' });
    await d;
    expect(order).toEqual(['c', 'd']);
    expect(w.inFlight).toBe(2);
  });

  it('a full window grants the lowest rank first (items under way before new ones), then arrival order', async () => {
    const w = new WriteWindow({ max: 1 });
    const [a] = await take(w, 1);
    const order: string[] = [];
    const queued = (
      [
        ['new item 7', 7],
        ['item 2', 2],
        ['unranked', undefined],
        ['item 2 again', 2],
        ['new item 5', 5],
      ] as const
    ).map(([name, rank]) =>
      w.acquire(undefined, Infinity, undefined, rank).then((t) => {
        order.push(name);
        w.release(t, { kind: 'ok' });
      }),
    );
    w.release(a!, { kind: 'ok' });
    await Promise.all(queued);
    expect(order).toEqual(['unranked', 'item 2', 'item 2 again', 'new item 5', 'new item 7']);
  });

  it('honours Retry-After: no new write before it has passed, capped', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const w = new WriteWindow({ max: 4, retryAfterCapMs: 60_000 });
    const t = await w.acquire();
    w.release(t, { kind: 'signal', retryAfterMs: 2_000 });
    expect(w.size).toBe(2);
    let started = false;
    const next = w.acquire().then((x) => {
      started = true;
      return x;
    });
    await vi.advanceTimersByTimeAsync(1_999);
    expect(started).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await next;
    expect(started).toBe(true);
    // A proxy asking for ten hours is honoured for the cap only.
    w.release(await next, { kind: 'signal', retryAfterMs: 36_000_000 });
    expect(w.pausedUntil).toBe(Date.now() + 60_000);
  });

  it("a wait ends at its deadline and at the caller's signal", async () => {
    vi.useFakeTimers({ now: 0 });
    const w = new WriteWindow({ max: 1 });
    await w.acquire();
    const late = w.acquire(undefined, 5_000, () => new Error('no room in time'));
    const ac = new AbortController();
    const cancelled = w.acquire(ac.signal);
    ac.abort();
    await expect(cancelled).rejects.toMatchObject({ code: 'OMNI_CANCELED' });
    const settled = expect(late).rejects.toThrow('no room in time');
    await vi.advanceTimersByTimeAsync(5_000);
    await settled;
    expect(w.wouldWait()).toBe(true);
  });

  it('one timer serves every waiting deadline, the earliest first; none is left once nobody waits', async () => {
    vi.useFakeTimers({ now: 0 });
    const w = new WriteWindow({ max: 1 });
    const first = await w.acquire();
    const ended: string[] = [];
    const wait = (name: string, deadline: number) =>
      w
        .acquire(undefined, deadline, () => new Error(name))
        .then(
          (t) => {
            ended.push(`${name} started`);
            return t;
          },
          (e: Error) => {
            ended.push(`${e.message} timed out`);
          },
        );
    const late = wait('late', 9_000);
    const early = wait('early', 3_000);
    const never = wait('never', Infinity);
    const twin = wait('twin', 3_000);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(2_999);
    expect(ended).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(ended).toEqual(['early timed out', 'twin timed out']);
    await Promise.all([early, twin]);
    await vi.advanceTimersByTimeAsync(6_000);
    await late;
    expect(ended).toEqual(['early timed out', 'twin timed out', 'late timed out']);
    // The one left has no deadline: no timer; it starts in its turn.
    expect(vi.getTimerCount()).toBe(0);
    w.release(first, { kind: 'ok' });
    const t = await never;
    expect(ended.at(-1)).toBe('never started');
    w.release(t!, { kind: 'ok' });
    expect(vi.getTimerCount()).toBe(0);
    expect(w.wouldWait()).toBe(false);
  });

  it('a signal cancels only the writes waiting with it, and the window lets go of it once they are gone', async () => {
    const w = new WriteWindow({ max: 1 });
    const first = await w.acquire();
    const a = new AbortController();
    const b = new AbortController();
    const listeners = (s: AbortSignal): number => getEventListeners(s, 'abort').length;
    const ofA = [w.acquire(a.signal), w.acquire(a.signal)];
    const ofB = w.acquire(b.signal);
    expect(listeners(a.signal)).toBe(1);
    expect(listeners(b.signal)).toBe(1);
    a.abort();
    for (const p of ofA) await expect(p).rejects.toMatchObject({ code: 'OMNI_CANCELED' });
    w.release(first, { kind: 'ok' });
    const t = await ofB;
    expect(listeners(b.signal)).toBe(0);
    w.release(t, { kind: 'ok' });
    expect(w.inFlight).toBe(0);
  });

  it('refuses a most below 1', () => {
    expect(() => new WriteWindow({ max: 0 })).toThrow(RangeError);
  });
});

describe('what a failed write is', () => {
  it("back-pressure: DeadlineExceeded, Unavailable, a proxy's 429/503; ResourceExhausted is permanent", () => {
    expect(classifyWriteFailure(new ResourceExhaustedError('etcd write payload (327 bytes) exceeds the burst'))).toBe(
      'permanent',
    );
    for (const e of [
      new DeadlineExceededError('x'),
      new UnavailableError('x'),
      new TransportError('x', { retriable: true, httpStatus: 429, retryAfterMs: 1000 }),
      new TransportError('x', { retriable: true, httpStatus: 503 }),
    ]) {
      expect(classifyWriteFailure(e)).toBe('pressure');
    }
  });

  it("a broken exchange is a lost answer; refusals, malformed answers and the caller's cancellation are final", () => {
    expect(classifyWriteFailure(new TransportError('reset', { retriable: true }))).toBe('lost');
    expect(classifyWriteFailure(new TransportError('bad certificate'))).toBe('final');
    expect(classifyWriteFailure(new FailedPreconditionError('conflict'))).toBe('final');
    expect(classifyWriteFailure(new PermissionDeniedError('no'))).toBe('final');
    expect(classifyWriteFailure(new Error('not ours'))).toBe('final');
    const ac = new AbortController();
    ac.abort();
    expect(classifyWriteFailure(new DeadlineExceededError('x'), ac.signal)).toBe('final');
  });
});

describe('the re-read verdicts', () => {
  it('Update: at v+1 with our content applied; still at v not applied; anything else changed', () => {
    expect(updateVerdict(removal('5'), applied('5'))).toBe('applied');
    expect(updateVerdict(removal('5'), stored('5'))).toBe('not-applied');
    // v+1 but someone else's content (another finalizer removed, a label, the spec, the owner, the phase).
    expect(updateVerdict(removal('5'), stored('6'))).toBe('changed');
    expect(
      updateVerdict(removal('5'), { ...applied('5'), metadata: { ...applied('5').metadata, labels: { a: '2' } } }),
    ).toBe('changed');
    expect(updateVerdict(removal('5'), { ...applied('5'), spec: { protoSpec: new Uint8Array([8, 2]) } })).toBe(
      'changed',
    );
    expect(updateVerdict(removal('5'), { ...applied('5'), metadata: { ...applied('5').metadata, owner: 'x' } })).toBe(
      'changed',
    );
    expect(
      updateVerdict(removal('5'), { ...applied('5'), metadata: { ...applied('5').metadata, phase: 'running' } }),
    ).toBe('changed');
    // Our content but further on: written again since (not ours alone).
    expect(updateVerdict(removal('5'), { ...applied('5'), metadata: { ...applied('5').metadata, version: '7' } })).toBe(
      'changed',
    );
  });

  it('Destroy: a Get answering NotFound is applied; found at the version read not applied; else changed', () => {
    expect(destroyVerdict(stored('5'), undefined)).toBe('applied');
    expect(destroyVerdict(stored('5'), stored('5'))).toBe('not-applied');
    expect(destroyVerdict(undefined, stored('9'))).toBe('not-applied');
    expect(destroyVerdict(stored('5'), stored('6'))).toBe('changed');
  });

  it('Create: NotFound not applied; our owner, labels and spec found applied (finalizers aside); else foreign', () => {
    const sent = stored('undefined', { owner: '', finalizers: [] });
    expect(createVerdict(sent, 'p.ProvisionController', undefined)).toBe('not-applied');
    const ours = stored('1', { owner: 'p.ProvisionController', finalizers: ['omni.Controller'] });
    expect(createVerdict(sent, 'p.ProvisionController', ours)).toBe('applied');
    expect(createVerdict(sent, 'p.ProvisionController', stored('1', { owner: 'someone' }))).toBe('changed');
    expect(createVerdict(sent, 'p.ProvisionController', stored('1', { owner: 'p.ProvisionController' }, [8, 3]))).toBe(
      'changed',
    );
  });

  it("the provider label Omni adds to a Create or Update is ours; any other label makes it someone else's", () => {
    const withLabels = (r: Resource, labels: Record<string, string>): Resource => ({
      ...r,
      metadata: { ...r.metadata, labels },
    });
    const PROVIDER = { 'omni.sidero.dev/infra-provider-id': 'p' };
    const sent = stored('undefined', { owner: '', finalizers: [], labels: {} });
    const ours = stored('1', { owner: 'p.HealthStatusController', finalizers: [], labels: PROVIDER });
    expect(createVerdict(sent, 'p.HealthStatusController', ours)).toBe('applied');
    // Sent with another value: Omni forced its own.
    expect(
      createVerdict(withLabels(sent, { 'omni.sidero.dev/infra-provider-id': 'x' }), 'p.HealthStatusController', ours),
    ).toBe('applied');
    expect(createVerdict(sent, 'p.HealthStatusController', withLabels(ours, { ...PROVIDER, b: '1' }))).toBe('changed');
    expect(updateVerdict(removal('5'), withLabels(applied('5'), { a: '1', ...PROVIDER }))).toBe('applied');
    expect(updateVerdict(removal('5'), withLabels(applied('5'), { ...PROVIDER }))).toBe('changed');
  });
});

/**
 * A backend whose writes answer `script` in turn (then ok) and whose Get answers `current()` (NotFound when undefined).
 */
function scripted(
  script: Error[],
  current: () => Resource | undefined,
  o: { getMs?: number; retries?: number; observer?: WriteObserver } = {},
) {
  const log: string[] = [];
  let t = 0;
  /** Each write between the observer's two calls, as GatewayState makes it (observer.ts). */
  const observed = <T>(method: WriteIntent['method'], opts: CallOptions | undefined, send: () => Promise<T>) =>
    observeWrite(
      o.observer,
      { method, resource: P, owner: '' },
      send,
      () => undefined,
      opts?.signal,
      (opts as DeferringOptions | undefined)?.deferOutcome,
    );
  const core: CoreState = {
    get: async () => {
      log.push('Get');
      t += o.getMs ?? 0;
      const r = current();
      if (!r) throw new NotFoundError('gone');
      return r;
    },
    update: (r, opts) =>
      observed('Update', opts, async () => {
        log.push('Update');
        const e = script.shift();
        if (e) throw e;
        return { ...r, metadata: { ...r.metadata, version: String(Number(r.metadata.version) + 1) } };
      }),
    create: (r, opts) =>
      observed('Create', opts, async () => {
        log.push('Create');
        const e = script.shift();
        if (e) throw e;
        return { ...r, metadata: { ...r.metadata, version: '1' } };
      }),
    destroy: (_p, opts) =>
      observed('Destroy', opts, async () => {
        log.push('Destroy');
        const e = script.shift();
        if (e) throw e;
      }),
    list: () => Promise.reject(new Error('not used')),
    watchKind: () => {
      throw new Error('not used');
    },
  };
  const pauses: number[] = [];
  const state = withBackPressure(core, {
    maxWritesInFlight: 8,
    retries: o.retries ?? 3,
    maxWaitMs: 10_000,
    random: () => 0,
    now: () => t,
    delay: async (ms) => {
      pauses.push(ms);
      t += ms;
    },
  });
  return { state, log, pauses };
}

const lost = () => new TransportError('other side closed', { retriable: true });
const deadline = () => new DeadlineExceededError('etcd write throttled out');

describe('a write of unknown outcome is read back before anything is sent again', () => {
  it('an Update that took effect (v+1, our content) is not sent again', async () => {
    const s = scripted([lost()], () => applied('5'));
    const out = await s.state.update(removal('5'));
    expect(out.metadata.version).toBe('6');
    expect(s.log).toEqual(['Update', 'Get']);
    expect(s.state.throttling()).toMatchObject({ lostAnswers: 1, foundApplied: 1, retriedWrites: 0, signals: 0 });
  });

  it('an Update still at the old version is sent again, after a pause', async () => {
    const s = scripted([deadline()], () => stored('5'));
    await s.state.update(removal('5'));
    expect(s.log).toEqual(['Update', 'Get', 'Update']);
    expect(s.pauses).toEqual([50]);
    expect(s.state.throttling()).toMatchObject({ signals: 1, retriedWrites: 1, foundApplied: 0, minWritesInFlight: 4 });
  });

  it('an Update overtaken by someone else goes to the conflict path: wrap reads again and re-plans', async () => {
    // Someone else removed our finalizer meanwhile (version 6, not our content).
    let cur = stored('5');
    const s = scripted([deadline()], () => cur);
    const state = wrapCore(s.state, { delay: async () => undefined });
    const done = state.removeFinalizers(stored('5'), ['bm.A']);
    cur = { ...stored('6'), metadata: { ...stored('6').metadata, finalizers: ['Other'], labels: { a: '1', b: '2' } } };
    const r = await done;
    expect(r.outcome).toBe('absent');
    expect(s.log).toEqual(['Update', 'Get', 'Get']);
  });

  it("an Update of a resource gone meanwhile throws the Get's NotFound (rule 4 is the caller's)", async () => {
    const s = scripted([deadline()], () => undefined);
    await expect(s.state.update(removal('5'))).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a Destroy is done once a Get by its ID answers NotFound; resent while found at the version read', async () => {
    const gone = scripted([deadline()], () => undefined);
    await gone.state.destroy(P, { before: stored('5') });
    expect(gone.log).toEqual(['Destroy', 'Get']);
    expect(gone.state.throttling().foundApplied).toBe(1);
    const still = scripted([lost()], () => stored('5'));
    await still.state.destroy(P, { before: stored('5') });
    expect(still.log).toEqual(['Destroy', 'Get', 'Destroy']);
    const other = scripted([lost()], () => stored('6'));
    await expect(other.state.destroy(P, { before: stored('5') })).rejects.toBeInstanceOf(FailedPreconditionError);
    expect(other.log).toEqual(['Destroy', 'Get']);
  });

  it('a Create: NotFound is sent again, found with our content done, found otherwise AlreadyExists', async () => {
    const sent = stored('undefined', { owner: '', finalizers: [] });
    const missing = scripted([lost()], () => undefined);
    await missing.state.create(sent, { owner: 'p.C' });
    expect(missing.log).toEqual(['Create', 'Get', 'Create']);
    const there = scripted([lost()], () => stored('1', { owner: 'p.C', finalizers: [] }));
    expect((await there.state.create(sent, { owner: 'p.C' })).metadata.version).toBe('1');
    expect(there.log).toEqual(['Create', 'Get']);
    const theirs = scripted([lost()], () => stored('1', { owner: 'q.C' }));
    await expect(theirs.state.create(sent, { owner: 'p.C' })).rejects.toBeInstanceOf(AlreadyExistsError);
  });

  it("a refusal is the caller's at once: no Get, nothing sent again", async () => {
    const s = scripted([new PermissionDeniedError('no')], () => stored('5'));
    await expect(s.state.update(removal('5'))).rejects.toBeInstanceOf(PermissionDeniedError);
    expect(s.log).toEqual(['Update']);
  });

  it('bounded in sends: after 1 + retries, STUB_THROTTLED names the resource and says it was throttled', async () => {
    const s = scripted(Array.from({ length: 20 }, deadline), () => stored('5'));
    const err = await s.state.update(removal('5')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThrottledError);
    expect((err as Error).message).toMatch(
      new RegExp(
        String.raw`^Update infra-provider\/InfraMachines\.omni\.sidero\.dev\/m1: throttled by Omni: ` +
          String.raw`sent 4 times .* after 4 back-pressure answers`,
      ),
    );
    expect(s.log.filter((x) => x === 'Update')).toHaveLength(4);
    expect(s.state.throttling()).toMatchObject({ signals: 4, retriedWrites: 3, gaveUp: 1, minWritesInFlight: 1 });
  });

  it("bounded in time: retries stop when the next pause would pass the write's time", async () => {
    // Every re-read takes 6 s of the clock; a write has 10 s from its first failure: two sends.
    const s = scripted(Array.from({ length: 20 }, deadline), () => stored('5'), { getMs: 6_000, retries: 100 });
    const err = await s.state.update(removal('5')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThrottledError);
    expect((err as Error).message).toContain(
      'out of time (10 s for its retries) after 2 back-pressure answers within 12.1 s',
    );
    expect(s.log).toEqual(['Update', 'Get', 'Update', 'Get']);
  });

  it("larger than Omni's burst: sent once, never again; STUB_WRITE_TOO_LARGE names resource and setting", async () => {
    const s = scripted(
      [new ResourceExhaustedError('etcd write payload (327 bytes) exceeds the configured burst (300)')],
      () => stored('5'),
    );
    const err = await s.state.update(removal('5')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WriteTooLargeError);
    expect(exitCodeFor(err)).toBe(6);
    const message = (err as Error).message;
    expect(message).toMatch(
      /^Update infra-provider\/InfraMachines\.omni\.sidero\.dev\/m1: Omni refused this write as /,
    );
    expect(message).toContain('327 bytes');
    expect(message).toContain('storage.rateLimits.etcd.infraProvider.writeBytesBurst');
    expect(message).toContain('--storage-rate-limits-etcd-infra-provider-write-bytes-burst');
    expect(s.log).toEqual(['Update']);
    expect(s.state.throttling()).toMatchObject({ signals: 0, tooLarge: 1, gaveUp: 0, retriedWrites: 0 });
  });

  it('notAfter: no write starts at or after it, none sent again past it (STUB_DEADLINE, nothing sent)', async () => {
    const s = scripted(Array.from({ length: 20 }, deadline), () => stored('5'), { getMs: 1_000, retries: 100 });
    // The scripted clock starts at 0: the time for writes is over.
    await expect(s.state.update(removal('5'), { notAfter: 0 })).rejects.toBeInstanceOf(DeadlineReachedError);
    expect(s.log).toEqual([]);
    // Each read-back takes 1 s: after the send at 0 s and at ~1.05 s, the next would come after 2 s.
    const err = await s.state.update(removal('5'), { notAfter: 2_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineReachedError);
    expect((err as Error).message).toMatch(
      /^Update .*: not sent again: the time for writes \(--timeout\) had passed after 2 back-pressure answers/,
    );
    expect(s.log).toEqual(['Update', 'Get', 'Update', 'Get']);
  });

  it("a pushed-back or lost send's outcome is what its read-back shows (refused, ok, unknown if changed)", async () => {
    const outcomes = (script: Error[], current: () => Resource | undefined) => {
      const seen: string[] = [];
      const s = scripted(script, current, {
        observer: () => (o) => seen.push(`${o.result}${o.result === 'ok' && o.evidence ? ` (${o.evidence})` : ''}`),
      });
      return { s, seen };
    };
    const refused = outcomes([deadline()], () => stored('5'));
    await refused.s.state.update(removal('5'));
    expect(refused.seen).toEqual(['refused', 'ok']);
    const notApplied = outcomes([lost()], () => stored('5'));
    await notApplied.s.state.update(removal('5'));
    expect(notApplied.seen).toEqual(['not-applied', 'ok']);
    const found = outcomes([deadline()], () => applied('5'));
    await found.s.state.update(removal('5'));
    expect(found.seen).toEqual(['ok (read-back)']);
    const changedMeanwhile = outcomes([lost()], () => stored('7'));
    await expect(changedMeanwhile.s.state.update(removal('5'))).rejects.toBeInstanceOf(FailedPreconditionError);
    expect(changedMeanwhile.seen).toEqual(['unknown']);
    // Omni's refusal and its burst's are the answer's own.
    const tooLarge = outcomes([new ResourceExhaustedError('too large')], () => stored('5'));
    await expect(tooLarge.s.state.update(removal('5'))).rejects.toBeInstanceOf(WriteTooLargeError);
    expect(tooLarge.seen).toEqual(['failed']);
  });

  it('reads are never held by the window', async () => {
    vi.useFakeTimers({ now: 0 });
    const s = scripted([], () => stored('5'));
    const w = withBackPressure(
      {
        get: s.state.get.bind(s.state),
        list: s.state.list.bind(s.state),
        watchKind: s.state.watchKind.bind(s.state),
        create: s.state.create.bind(s.state),
        destroy: s.state.destroy.bind(s.state),
        update: () =>
          Promise.reject(new TransportError('slow down', { retriable: true, httpStatus: 429, retryAfterMs: 30_000 })),
      },
      { maxWritesInFlight: 1, retries: 0 },
    );
    await expect(w.update(removal('5'))).rejects.toBeInstanceOf(ThrottledError);
    // New writes are held for 30 s; a Get goes through now.
    expect((await w.get(P)).metadata.version).toBe('5');
  });
});
