// The limiter of items and wipes (limiter.ts; calls: the client's call-limit.ts, by the same ranks): slots
// are given in rank order, then in arrival order, so that the next step of an item under way goes before the first
// step of a new one; with one rank it is FIFO.

import { describe, expect, it } from 'vitest';
import { Limiter } from '../../../src/provider/run/limiter.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('the limiter', () => {
  it('gives a freed slot to the lowest rank waiting, then to the earliest of a rank; unranked (0) first', async () => {
    const l = new Limiter(1);
    await l.acquire();
    const order: string[] = [];
    const waits = (
      [
        ['new item 9', 9],
        ['item 3', 3],
        ['a refusal', 0],
        ['item 3 again', 3],
        ['item 1', 1],
      ] as const
    ).map(([name, rank]) =>
      l.run(async () => {
        order.push(name);
        await tick();
      }, rank),
    );
    l.release();
    await Promise.all(waits);
    expect(order).toEqual(['a refusal', 'item 1', 'item 3', 'item 3 again', 'new item 9']);
  });

  it('outside: an item back from a wait takes its place before new items, in its rank', async () => {
    const items = new Limiter(1);
    const order: string[] = [];
    let back: () => void = () => undefined;
    const waiting = new Promise<void>((r) => {
      back = r;
    });
    await items.each(
      ['a', 'b', 'c'],
      async (id) => {
        order.push(`${id} starts`);
        if (id === 'a') {
          // a waits for Omni without its slot; b starts meanwhile, and a comes back before c.
          await items.outside(() => waiting, 1);
          order.push('a again');
          return;
        }
        if (id === 'b') back();
        await tick();
      },
      (id) => ({ a: 1, b: 2, c: 3 })[id]!,
    );
    expect(order).toEqual(['a starts', 'b starts', 'a again', 'c starts']);
  });
  it('each: after an unexpected error nothing more starts, the items under way finish, then it throws', async () => {
    for (const throwing of ['async', 'sync'] as const) {
      const l = new Limiter(2);
      const log: string[] = [];
      const run = (id: string): Promise<void> => {
        if (id === 'b') {
          log.push('b fails');
          if (throwing === 'sync') throw new Error('b broke');
          return Promise.reject(new Error('b broke'));
        }
        return (async () => {
          log.push(`${id} starts`);
          for (let i = 0; i < 3; i++) await tick();
          log.push(`${id} ends`);
        })();
      };
      await expect(l.each(['a', 'b', 'c', 'd'], run)).rejects.toThrow('b broke');
      expect(log).toEqual(['a starts', 'b fails', 'a ends']);
      // Every slot given back.
      expect(await Promise.race([l.run(async () => 'free'), tick().then(() => 'held')])).toBe('free');
    }
  });

  it('items: start at one per call in flight, one more per release (grow) up to 64, a waiter at once', async () => {
    const items = Limiter.forItems(4);
    expect([items.width, items.max]).toEqual([4, 64]);
    for (let i = 0; i < 4; i++) await items.acquire();
    let started = false;
    const waiting = items.acquire().then(() => {
      started = true;
    });
    await tick();
    expect(started).toBe(false);
    items.grow();
    await waiting;
    expect([started, items.width]).toEqual([true, 5]);
    for (let i = 0; i < 300; i++) items.grow();
    expect(items.width).toBe(64);
    expect([Limiter.forItems(200).width, Limiter.forItems(200).max]).toEqual([200, 200]);
  });
});
