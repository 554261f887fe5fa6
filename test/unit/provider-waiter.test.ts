// The waiter reads Omni's progress from one kind watch per type. Omni before 1.0 sends no BOOTSTRAPPED
// event to providers, so "not seen yet" must not be taken for "gone", and "never seen" must still end.

import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../src/omni-client/errors.js';
import { newMetadata, type Pointer, type Resource } from '../../src/omni-client/resource.js';
import type { State, WatchEvent } from '../../src/omni-client/types.js';
import { FinalizerWaiter } from '../../src/provider/waiter.js';

const ptr: Pointer = { namespace: 'infra-provider', type: 'MachineRequestStatuses.omni.sidero.dev', id: 'r1' };

function res(version: string, finalizers: string[]): Resource {
  return { metadata: newMetadata(ptr, { version, phase: 'tearingDown', finalizers }), spec: { protoSpec: new Uint8Array() } };
}

/** A State whose watch yields the given batches (spaced out) and then stays open; Get answers from `stored`. */
function watchOnly(batches: WatchEvent[][], stored: () => Resource | undefined, gets: { n: number }): State {
  const partial: Partial<State> = {
    watchKind: (_ns, _type, opts) => ({
      async *[Symbol.asyncIterator]() {
        for (const b of batches) {
          await new Promise((r) => setTimeout(r, 20));
          yield b;
        }
        await new Promise<void>((resolve) => opts?.signal?.addEventListener('abort', () => resolve(), { once: true }));
      },
    }),
    get: async () => {
      gets.n++;
      const r = stored();
      if (!r) throw new NotFoundError('not found');
      return r;
    },
  };
  return partial as State;
}

describe('FinalizerWaiter without BOOTSTRAPPED (Omni before 1.0)', () => {
  it('resolves released from the events alone, with no extra read', async () => {
    const gets = { n: 0 };
    const state = watchOnly(
      [[{ type: 'created', resource: res('3', ['MachineRequestStatusCleanupController']) }], [{ type: 'updated', resource: res('4', []) }]],
      () => res('4', []),
      gets,
    );
    const w = new FinalizerWaiter(state);
    await expect(w.wait(ptr, 'no-finalizers', 5_000, '3')).resolves.toBe('released');
    expect(gets.n).toBe(0);
    w.close();
  });

  it('a DESTROYED event is gone, bootstrapped or not', async () => {
    const gets = { n: 0 };
    const state = watchOnly([[{ type: 'destroyed', resource: res('5', []) }]], () => undefined, gets);
    const w = new FinalizerWaiter(state);
    await expect(w.wait(ptr, 'no-finalizers', 5_000)).resolves.toBe('gone');
    w.close();
  });

  it('not seen at all: not taken for gone at once, then read once; NotFound is gone, well before the timeout', async () => {
    const gets = { n: 0 };
    const state = watchOnly([], () => undefined, gets);
    const w = new FinalizerWaiter(state);
    const t0 = Date.now();
    await expect(w.wait(ptr, 'no-finalizers', 10_000)).resolves.toBe('gone');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(gets.n).toBe(1);
    w.close();
  });

  it('not seen, and the read shows it still held: keeps waiting until the timeout', async () => {
    const gets = { n: 0 };
    const state = watchOnly([], () => res('2', ['ConfigPatchRequestController']), gets);
    const w = new FinalizerWaiter(state);
    await expect(w.wait(ptr, 'no-finalizers', 1_500)).resolves.toBe('timeout');
    expect(gets.n).toBe(1);
    w.close();
  });
});

const bootstrapped: WatchEvent = { type: 'bootstrapped', resource: { metadata: newMetadata({ ...ptr, id: '' }), spec: { protoSpec: new Uint8Array() } } };

// Design rule 10: a watch's bootstrap is a List by another name; a resource missing from it is an
// absence, not evidence that it is gone.
describe('FinalizerWaiter: absence from the bootstrap', () => {
  it('a no-finalizers wait reads the resource by its ID: NotFound is gone', async () => {
    const gets = { n: 0 };
    const w = new FinalizerWaiter(watchOnly([[bootstrapped]], () => undefined, gets));
    await expect(w.wait(ptr, 'no-finalizers', 5_000)).resolves.toBe('gone');
    expect(gets.n).toBe(1);
    // The Get by ID that found nothing is not evidence that the ID ever named anything.
    expect(w.sawById(ptr)).toBe(false);
    w.close();
  });

  it('a no-finalizers wait whose Get finds the resource still held keeps waiting; found released, it is released', async () => {
    const held = { n: 0 };
    const w1 = new FinalizerWaiter(watchOnly([[bootstrapped]], () => res('2', ['ConfigPatchRequestController']), held));
    await expect(w1.wait(ptr, 'no-finalizers', 600)).resolves.toBe('timeout');
    expect(held.n).toBe(1);
    expect(w1.sawById(ptr)).toBe(true);
    w1.close();
    const free = { n: 0 };
    const w2 = new FinalizerWaiter(watchOnly([[bootstrapped]], () => res('2', []), free));
    await expect(w2.wait(ptr, 'no-finalizers', 5_000)).resolves.toBe('released');
    w2.close();
  });

  it('a gone wait (a released parent, only pacing the next pass) ends on the absence without a read', async () => {
    const gets = { n: 0 };
    const w = new FinalizerWaiter(watchOnly([[bootstrapped]], () => undefined, gets));
    await expect(w.wait(ptr, 'gone', 5_000)).resolves.toBe('gone');
    expect(gets.n).toBe(0);
    w.close();
  });

  it('names an ID by its live events, not by the bootstrap\'s contents', async () => {
    const gets = { n: 0 };
    const w = new FinalizerWaiter(watchOnly([
      [{ type: 'created', resource: res('3', ['MachineRequestStatusCleanupController']) }, bootstrapped],
      [{ type: 'updated', resource: res('4', ['MachineRequestStatusCleanupController']) }],
    ], () => undefined, gets));
    const waiting = w.wait(ptr, 'no-finalizers', 300);
    await new Promise((r) => setTimeout(r, 30));
    expect(w.sawById(ptr)).toBe(false);
    await expect(waiting).resolves.toBe('timeout');
    expect(w.sawById(ptr)).toBe(true);
    expect(gets.n).toBe(0);
    w.close();
  });
});

describe('FinalizerWaiter without a limit (--wait --timeout 0)', () => {
  it('an infinite timeout never times out: held, it waits; released later, it is released', async () => {
    const gets = { n: 0 };
    const state = watchOnly([[{ type: 'created', resource: res('3', ['MachineRequestStatusCleanupController']) }], [], [], [], [], [], [], [], [], [], [{ type: 'updated', resource: res('4', []) }]], () => res('3', ['MachineRequestStatusCleanupController']), gets);
    const w = new FinalizerWaiter(state);
    // setTimeout cannot hold Infinity and would fire after 1 ms: "timeout" at once.
    await expect(w.wait(ptr, 'no-finalizers', Number.POSITIVE_INFINITY, '3')).resolves.toBe('released');
    w.close();
  });
});

describe('FinalizerWaiter.finalizersOf: what the watch saw last (the settle names what still holds a resource)', () => {
  it('the finalizers of the last event, gone after a DESTROYED event, unknown for a kind not watched', async () => {
    const gets = { n: 0 };
    const other: Pointer = { ...ptr, id: 'r2' };
    const state = watchOnly([
      [{ type: 'created', resource: res('3', ['A', 'B']) }, { type: 'created', resource: { ...res('3', ['A', 'B']), metadata: { ...res('3', ['A', 'B']).metadata, id: 'r2' } } }],
      [{ type: 'updated', resource: res('4', ['B']) }],
      [{ type: 'destroyed', resource: { ...res('5', []), metadata: { ...res('5', []).metadata, id: 'r2' } } }],
    ], () => undefined, gets);
    const w = new FinalizerWaiter(state);
    expect(w.finalizersOf(ptr)).toBeUndefined();
    await expect(w.wait(ptr, 'gone', 200)).resolves.toBe('timeout');
    expect(w.finalizersOf(ptr)).toEqual(['B']);
    expect(w.finalizersOf(other)).toBe('gone');
    expect(w.finalizersOf({ ...ptr, type: 'Other.omni.sidero.dev' })).toBeUndefined();
    expect(gets.n).toBe(0);
    w.close();
  });
});
