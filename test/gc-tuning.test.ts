import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_FLAG, PRETENURING_FLAG, tuneGc } from '../src/gc-tuning.js';

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
  it('turns allocation-site pretenuring off and slows the heap growth when the operator chose nothing', () => {
    const both = [PRETENURING_FLAG, HEAP_GROWING_FLAG];
    expect(run([], undefined)).toEqual({ done: both, seen: both });
    expect(run(['--enable-source-maps'], '--max-old-space-size=512')).toEqual({ done: both, seen: both });
  });

  it('leaves each explicit choice alone, on the command line or in NODE_OPTIONS, either spelling', () => {
    expect(run(['--allocation-site-pretenuring'])).toEqual({ done: [HEAP_GROWING_FLAG], seen: [HEAP_GROWING_FLAG] });
    expect(run([], '--max-old-space-size=512 --no-allocation_site_pretenuring --heap_growing_percent=300')).toEqual({
      done: [],
      seen: [],
    });
    expect(run(['--heap-growing-percent=10'])).toEqual({ done: [PRETENURING_FLAG], seen: [PRETENURING_FLAG] });
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
