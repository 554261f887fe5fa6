// A machine's wipe at most once among runs whose lifetimes overlap (docs/design.md rule 8), `--machine`
// runs included: before it wipes, a run claims the machine with a version-guarded Update of a resource
// of that machine that the stub owns and destroys later in the same item (its InfraMachineStatus, else
// one of its resources in `infra-provider:<id>`; the planner names it, WipeOp.claim): an annotation
// naming the run and until when the claim holds. Of two runs that read the same version, exactly one
// Update applies; the other reads the resource again and finds the claim of another run. Nothing new
// is created, and nothing is left behind: the claim goes with the resource it is written on. A claim
// whose run is gone (past `until`: the wipe's timeout and a margin) may be taken over.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import type { CallOptions, State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { hasCode } from '../../omni-client/errors.js';

export const ANNOTATION_WIPE_CLAIM = 'stub-provider.sidero.dev/wipe-claim';

/** What a claim holds: the run, when it claimed, and until when (both RFC 3339). */
export interface WipeClaim {
  run: string;
  at: string;
  until: string;
}

export type ClaimResult =
  | { kind: 'ours' }
  /** Another run claimed it and its claim still holds; or the resource is gone (a run got past the wipe). */
  | { kind: 'taken'; reason: string };

export interface ClaimDeps {
  state: State;
  runId: string;
  /** Wall clock as Omni sees it. */
  now: () => number;
  /** How long a claim holds: the wipe's timeout and a margin. */
  holdMs: number;
  /** The item's call options: the run's signal, the item's rank, no write after --timeout (notAfter). */
  options?: CallOptions;
  /** What a Get or the Update answered, for the run's caches. */
  observe?: (r: Resource) => void;
}

const MAX_ATTEMPTS = 4;

export function claimOf(r: Resource): WipeClaim | undefined {
  const text = r.metadata.annotations[ANNOTATION_WIPE_CLAIM];
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as Partial<WipeClaim>;
    if (typeof v.run === 'string' && typeof v.at === 'string' && typeof v.until === 'string')
      return { run: v.run, at: v.at, until: v.until };
  } catch {
    // An annotation we cannot read is someone's claim all the same: held until it expires below.
  }
  return { run: 'unknown', at: '', until: '' };
}

/** Claims the wipe of the machine on `target`; `ours` when this run may wipe it. */
export async function claimWipe(d: ClaimDeps, target: Pointer, machineId: string): Promise<ClaimResult> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const cur = await getIfExists(d.state, target, d.options);
    if (!cur)
      return {
        kind: 'taken',
        reason:
          `another run is releasing machine ${machineId}: its ${target.type.split('.')[0]}, which the wipe is ` +
          'claimed on, is already gone',
      };
    d.observe?.(cur);
    const held = claimOf(cur);
    if (held?.run === d.runId) return { kind: 'ours' };
    const nowMs = d.now();
    // An unreadable `until` (NaN) never expires by itself: the claim is someone's.
    if (held && !(Date.parse(held.until) <= nowMs))
      return {
        kind: 'taken',
        reason: `machine ${machineId} is being wiped and released by another run (${held.run}, claimed at ${held.at})`,
      };
    const claim: WipeClaim = {
      run: d.runId,
      at: new Date(nowMs).toISOString(),
      until: new Date(nowMs + d.holdMs).toISOString(),
    };
    const next: Resource = {
      metadata: {
        ...cur.metadata,
        annotations: { ...cur.metadata.annotations, [ANNOTATION_WIPE_CLAIM]: JSON.stringify(claim) },
      },
      spec: cur.spec,
    };
    try {
      const written = await d.state.update(next, { ...d.options, owner: cur.metadata.owner, before: cur });
      d.observe?.(written);
      return { kind: 'ours' };
    } catch (err) {
      // Another run's Update came first (or Omni changed it): read it again and see whose it is now.
      if (!hasCode(err, 'OMNI_FAILED_PRECONDITION') && !hasCode(err, 'OMNI_NOT_FOUND')) throw err;
    }
  }
  return { kind: 'taken', reason: `machine ${machineId}: its wipe claim kept changing (${MAX_ATTEMPTS} times)` };
}
