import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { PRETENURING_FLAG, tuneGc } from '../src/gc-tuning.js';

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
  it('turns allocation-site pretenuring off when the operator chose nothing', () => {
    expect(run([], undefined)).toEqual({ done: true, seen: [PRETENURING_FLAG] });
    expect(run(['--enable-source-maps'], '--max-old-space-size=512')).toEqual({ done: true, seen: [PRETENURING_FLAG] });
  });

  it('leaves an explicit choice alone, on the command line or in NODE_OPTIONS, either spelling', () => {
    expect(run(['--allocation-site-pretenuring'])).toEqual({ done: false, seen: [] });
    expect(run([], '--max-old-space-size=512 --no-allocation_site_pretenuring')).toEqual({ done: false, seen: [] });
  });

  it('runs on with V8 defaults when the runtime refuses a late flag', () => {
    expect(
      run([], undefined, () => {
        throw new Error('flags are frozen');
      }).done,
    ).toBe(false);
  });

  it('names a flag this Node knows (an unknown one would be ignored without a word)', () => {
    const options = execFileSync(process.execPath, ['--v8-options'], { encoding: 'utf8' });
    expect(options).toContain(PRETENURING_FLAG.replace('--no-', '--'));
  });
});
