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
