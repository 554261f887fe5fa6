import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_FLAG, PRETENURING_FLAG, YOUNG_GROWTH_FLAG, tuneGc } from '../src/gc-tuning.js';

function run(execArgv: string[], nodeOptions?: string, set: (f: string) => void = () => undefined) {
  const seen: string[] = [];
  const done = tuneGc({
    execArgv,
    nodeOptions,
    set: (f) => {
      seen.push(f);
      set(f);
    },
  });
  return { done, seen };
}

describe('GC tuning of the binary', () => {
  it('sets its three flags when the operator chose nothing (pretenuring, heap growth, young generation)', () => {
    const all = [PRETENURING_FLAG, HEAP_GROWING_FLAG, YOUNG_GROWTH_FLAG];
    expect(run([], undefined)).toEqual({ done: all, seen: all });
    expect(run(['--enable-source-maps'], '--max-old-space-size=512')).toEqual({ done: all, seen: all });
  });

  it('leaves each explicit choice alone, on the command line or in NODE_OPTIONS, either spelling', () => {
    const young = [HEAP_GROWING_FLAG, YOUNG_GROWTH_FLAG];
    expect(run(['--allocation-site-pretenuring'])).toEqual({ done: young, seen: young });
    expect(
      run(
        [],
        '--max-old-space-size=512 --no-allocation_site_pretenuring --heap_growing_percent=300 --max-semi-space-size=4',
      ),
    ).toEqual({ done: [], seen: [] });
    const growing = [PRETENURING_FLAG, YOUNG_GROWTH_FLAG];
    expect(run(['--heap-growing-percent=10'])).toEqual({ done: growing, seen: growing });
  });

  it('leaves the young generation alone when the operator sized it, or the whole heap, in any way', () => {
    const two = [PRETENURING_FLAG, HEAP_GROWING_FLAG];
    for (const flag of [
      '--max-semi-space-size=32',
      '--min_semi_space_size=2',
      '--semi-space-growth-factor=4',
      '--max-heap-size=400',
    ]) {
      expect(run([flag]).done).toEqual(two);
      expect(run([], `--enable-source-maps ${flag}`).done).toEqual(two);
    }
  });

  it('runs on with V8 defaults when the runtime refuses a late flag', () => {
    expect(
      run([], undefined, () => {
        throw new Error('flags are frozen');
      }).done,
    ).toEqual([]);
  });

  it('names flags this Node knows (an unknown one would be ignored without a word)', () => {
    const options = execFileSync(process.execPath, ['--v8-options'], { encoding: 'utf8' });
    expect(options).toContain(PRETENURING_FLAG.replace('--no-', '--'));
    expect(options).toContain(HEAP_GROWING_FLAG.replace(/=.*$/, ''));
    expect(options).toContain(YOUNG_GROWTH_FLAG.replace(/=.*$/, ''));
  });

  it('a late --semi-space-growth-factor takes effect: the young generation stays the size it had', () => {
    // A child that lets much of what it allocates survive a young collection or two (what makes V8
    // grow the young generation): with the flag set at run time, the new space does not grow.
    const script = `
      const v8 = require('node:v8');
      const ns = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
      if (process.argv[1] === 'tuned') v8.setFlagsFromString('${YOUNG_GROWTH_FLAG}');
      const first = ns(); let most = first; let keep = [];
      for (let n = 0; n < 2000000; n++) {
        const o = { n, s: 'x' + n, a: [n] };
        if (n % 3 === 0) keep.push(o);
        if (keep.length > 200000) keep = [];
        if (n % 20000 === 0) most = Math.max(most, ns());
      }
      console.log(JSON.stringify({ first, most }));`;
    const sizes = (how: string) =>
      JSON.parse(execFileSync(process.execPath, ['-e', script, how], { encoding: 'utf8' })) as {
        first: number;
        most: number;
      };
    // The new space's size counts its second semi-space once it is in use: at most twice the first.
    const tuned = sizes('tuned');
    expect(tuned.most).toBeLessThanOrEqual(2 * tuned.first);
    const untuned = sizes('default');
    expect(untuned.most).toBeGreaterThanOrEqual(8 * untuned.first);
  });

  it('a late --heap-growing-percent takes effect: a full collection at the next limit, not at four times', () => {
    // A child that keeps 40 MB alive and allocates garbage that survives young collections: with the
    // flag set at run time (as main.ts does), the old generation stays well under what V8's default
    // lets it reach before collecting again. Both children run with V8's --predictable (no background
    // GC threads, no timers of its own): on a loaded machine when a collection happened otherwise
    // varied with the scheduling of its helper threads (peaks of 50 to 167 MB either way); with it
    // the two peaks are the same on every run (134 and 167 MB on Node 20).
    const script = `
      const v8 = require('node:v8');
      if (process.argv[1] === 'tuned') v8.setFlagsFromString('${HEAP_GROWING_FLAG}');
      const keep = Array.from({ length: 400000 }, (_, i) => ({ i, s: 'k' + i }));
      let peak = 0; const ring = new Array(20000);
      for (let n = 0; n < 3000000; n++) {
        ring[n % ring.length] = { n, a: [n, n + 1], s: 'x' + n };
        if (n % 10000 === 0) peak = Math.max(peak, v8.getHeapStatistics().used_heap_size);
      }
      console.log(JSON.stringify({ peak, keep: keep.length }));`;
    const peak = (how: string) =>
      (
        JSON.parse(execFileSync(process.execPath, ['--predictable', '-e', script, how], { encoding: 'utf8' })) as {
          peak: number;
        }
      ).peak;
    expect(peak('tuned')).toBeLessThan(peak('default'));
  });
});
