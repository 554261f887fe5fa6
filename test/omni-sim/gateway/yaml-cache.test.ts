import { describe, expect, it } from 'vitest';
import { YamlCache } from '../../../src/omni-sim/gateway/resources.js';

const spec = (n: number) => new Uint8Array([0x0a, 1, n]);

function counting(): { render: (type: string, bytes: Uint8Array) => string; calls: () => number } {
  let n = 0;
  return {
    render: (type, bytes) => {
      n++;
      return `${type}:${bytes.join(',')}`;
    },
    calls: () => n,
  };
}

describe('the gateway rendered yaml_spec cache', () => {
  it('renders each spec once while the specs fit, and answers the same text', () => {
    const r = counting();
    const cache = new YamlCache(3, r.render);
    const first = [0, 1, 2].map((i) => cache.render('T', spec(i)));
    for (let pass = 0; pass < 4; pass++) {
      expect([0, 1, 2].map((i) => cache.render('T', spec(i)))).toEqual(first);
    }
    expect(r.calls()).toBe(3);
  });

  it('keys by type and bytes', () => {
    const r = counting();
    const cache = new YamlCache(4, r.render);
    expect(cache.render('A', spec(1))).toBe('A:10,1,1');
    expect(cache.render('B', spec(1))).toBe('B:10,1,1');
    expect(cache.render('A', spec(2))).toBe('A:10,1,2');
    expect(r.calls()).toBe(3);
  });

  it('misses on every call when a run walks more specs than it holds (why it is sized by the fleet)', () => {
    const r = counting();
    const cache = new YamlCache(2, r.render);
    for (let pass = 0; pass < 3; pass++) for (const i of [0, 1, 2]) cache.render('T', spec(i));
    expect(r.calls()).toBe(9);
  });
});
