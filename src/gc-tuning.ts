// One V8 setting the binary makes for itself: no allocation-site pretenuring.
//
// V8 decides, per allocation site (an object or array literal in the code), to allocate straight
// in the old generation once most objects of that site survive a young collection. A run reads
// tens of thousands of resources that live for the whole pass, then makes tens of thousands of calls
// whose objects die within milliseconds; some literals serve both, and once pretenured the short-lived
// ones pile up in the old generation until the next full collection. At 10 000 machines that made the
// peak RSS land anywhere between 250 and 510 MB from run to run; without pretenuring it stayed at
// 259-291 MB in 13 runs (docs/performance.md). Nothing else changes: the flag only moves where
// objects are first allocated.
//
// An operator who passes the flag (either way) on the node command line or in NODE_OPTIONS wins.

import { setFlagsFromString } from 'node:v8';

export const PRETENURING_FLAG = '--no-allocation-site-pretenuring';

export interface GcTuningInput {
  execArgv: readonly string[];
  nodeOptions: string | undefined;
  set: (flag: string) => void;
}

/** Turns pretenuring off unless the process was started with an explicit choice. True when set here. */
export function tuneGc(
  input: GcTuningInput = {
    execArgv: process.execArgv,
    nodeOptions: process.env['NODE_OPTIONS'],
    set: setFlagsFromString,
  },
): boolean {
  const given = [...input.execArgv, ...(input.nodeOptions ?? '').split(/\s+/)];
  if (given.some((a) => /^--(no-)?allocation[-_]site[-_]pretenuring$/.test(a))) return false;
  try {
    input.set(PRETENURING_FLAG);
    return true;
  } catch {
    // A runtime that refuses late flags runs with V8's defaults: slower to give memory back, not wrong.
    return false;
  }
}
