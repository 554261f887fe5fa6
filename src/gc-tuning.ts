// The V8 settings the binary makes for itself: no allocation-site pretenuring, a heap that grows by
// half of what a full collection left alive instead of by up to four times it, and a young generation
// that stays the size loading the CLI gave it.
//
// Pretenuring: V8 decides, per allocation site (an object or array literal in the code), to allocate
// straight in the old generation once most objects of that site survive a young collection. A run
// reads tens of thousands of resources that live for the whole pass, then makes tens of thousands of
// calls whose objects die within milliseconds; some literals serve both, and once pretenured the
// short-lived ones pile up in the old generation until the next full collection. At 10 000 machines
// that made the peak RSS land anywhere between 250 and 510 MB from run to run (docs/performance.md,
// "Memory").
//
// Heap growth: after a full collection V8 lets the old generation grow to up to four times what
// stayed alive before it collects again. A run's calls leave garbage in the old generation at a
// steady pace (what was in flight across two young collections), so a 10 000-machine run grew from
// 65 MB alive to 260 MB before its second full collection. Growing by half keeps the peak near what
// the run needs, for a few more full collections (docs/performance.md, "Memory").
//
// Young generation: V8 starts it small and doubles it, up to two semi-spaces of 16 MB each, whenever
// much of it survives a young collection. Loading the CLI already grows it to two of 8 MB; a run's
// Lists then double it. V8 sizes its maximum only when the process starts (its max-semi-space-size
// flag is read then), but it reads its growth factor each time it grows the young generation: a factor
// of 1 keeps it where loading left it (or smaller, once V8 shrinks it when allocation slows down). At
// 10 000 machines that is 16 MB less resident memory, for twice as many young collections
// (docs/performance.md, "Memory at 10 000 machines (target <= 200 MB)"). An operator who chose any
// size of the young generation (its semi-spaces, its growth, the whole heap's size) wins. Newer V8
// versions raise a growth factor below 2 back to 2: there the young generation grows as by default
// (more memory, nothing wrong).
//
// Nothing else changes: the flags only move where objects are first allocated and when a generation
// is collected. An operator who passes a flag (either way) on the node command line or in
// NODE_OPTIONS wins.

import { setFlagsFromString } from 'node:v8';

export const PRETENURING_FLAG = '--no-allocation-site-pretenuring';
export const HEAP_GROWING_FLAG = '--heap-growing-percent=50';
export const YOUNG_GROWTH_FLAG = '--semi-space-growth-factor=1';

/** Each flag, and what an explicit choice of it looks like (either spelling, with or without `no-`, any value). */
const FLAGS: readonly (readonly [string, RegExp])[] = [
  [PRETENURING_FLAG, /^--(no-)?allocation[-_]site[-_]pretenuring$/],
  [HEAP_GROWING_FLAG, /^--heap[-_]growing[-_]percent(=.*)?$/],
  [
    YOUNG_GROWTH_FLAG,
    /^--(semi[-_]space[-_]growth[-_]factor|(max|min)[-_]semi[-_]space[-_]size|max[-_]heap[-_]size)(=.*)?$/,
  ],
];

export interface GcTuningInput {
  execArgv: readonly string[];
  nodeOptions: string | undefined;
  set: (flag: string) => void;
}

/** Sets each flag the process was not started with an explicit choice of. The flags set here. */
export function tuneGc(
  input: GcTuningInput = {
    execArgv: process.execArgv,
    nodeOptions: process.env['NODE_OPTIONS'],
    set: setFlagsFromString,
  },
): string[] {
  const given = [...input.execArgv, ...(input.nodeOptions ?? '').split(/\s+/)];
  const set: string[] = [];
  for (const [flag, chosen] of FLAGS) {
    if (given.some((a) => chosen.test(a))) continue;
    try {
      input.set(flag);
      set.push(flag);
    } catch {
      // A runtime that refuses late flags runs with V8's defaults: more memory, not wrong.
    }
  }
  return set;
}
