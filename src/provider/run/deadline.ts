// --wait's end: when there is nothing left to wait for, and --timeout, one deadline for the whole run
// (docs/design.md, "Deadlines"). No write starts after it
// (CallOptions.notAfter, honoured by the client's write path; writes in flight finish), no item starts after it, and
// the run then reports what is true at that moment: what its caches show is left (`remaining`). If that is nothing but
// the deregistration, the deregistration runs within DEREGISTER_GRACE_MS; --settle ends at the same end.

import { T } from '../../omni-api/resource.js';
import type { Plan } from '../plan/plan.js';
import type { ItemOutcome, RefusalOutcome } from './outcomes.js';
import { keyOf } from './outcomes.js';

/** After --timeout, how long the deregistration may take when nothing else is left (a handful of writes). */
export const DEREGISTER_GRACE_MS = 10_000;

/** Something the run did not finish before --timeout, for the report. */
export interface Remaining {
  kind: string;
  id: string;
  reason: string;
  nextStep: string;
}

export class Deadline {
  #end: number;

  /** `timeoutMs` from now, on `monotonic`; Infinity: no limit. `now` is the client's clock (CallOptions.notAfter). */
  constructor(
    private readonly monotonic: () => number,
    timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.#end = monotonic() + timeoutMs;
  }

  /** Moves the end by `ms` (the time a person took to answer the confirmation was not the run's). */
  extend(ms: number): void {
    this.#end += ms;
  }

  leftMs(): number {
    return this.#end - this.monotonic();
  }

  passed(): boolean {
    return this.leftMs() <= 0;
  }

  /** The end (plus `graceMs`) in the client's clock, for CallOptions.notAfter; undefined without a limit. */
  notAfter(graceMs = 0): number | undefined {
    const left = this.leftMs();
    return Number.isFinite(left) ? this.now() + left + graceMs : undefined;
  }

  /** --settle, capped by what is left of the run (0 once it has passed: the report says it did not watch). */
  settleMs(settleMs: number): number {
    return Math.min(settleMs, Math.max(0, this.leftMs()));
  }
}

/**
 * What the plan made after --timeout still holds that the run did not report otherwise: items with no outcome (never
 * started, or stopped before a write that would have started after --timeout), new requests not refused, and the
 * deregistration when nothing else explains why it did not happen.
 */
export function remainingAt(
  plan: Plan,
  outcomes: ReadonlyMap<string, ItemOutcome>,
  refusals: ReadonlyMap<string, RefusalOutcome>,
  o: { whole: boolean; deregister: boolean; deregistered: boolean },
): Remaining[] {
  const again = 'run again: it carries on where this run stopped';
  const out: Remaining[] = [];
  for (const item of plan.items) {
    if (outcomes.has(keyOf(item))) continue;
    const what = item.kind === 'leftover' ? 'not cleaned up' : 'not released';
    out.push({ kind: item.kind, id: item.id, reason: `${what} before --timeout`, nextStep: again });
  }
  for (const r of plan.refusals) {
    if (r.done || refusals.has(`${r.kind}/${r.id}`)) continue;
    out.push({ kind: r.kind, id: r.id, reason: 'not refused before --timeout', nextStep: again });
  }
  const d = plan.deregistration;
  const pending = o.whole && o.deregister && !o.deregistered && d.status !== 'done' && d.status !== 'disabled';
  if (pending && out.length === 0 && plan.running.length === 0)
    out.push({
      kind: 'deregistration',
      id: plan.providerId,
      reason: `not deregistered before --timeout${d.reasons.length > 0 ? `: ${d.reasons.join('; ')}` : ''}`,
      nextStep: again,
    });
  return out;
}

/** The types whose being left, unreadable or unconfirmed means a machine or request of the provider may be left. */
const MACHINE_FACTS: ReadonlySet<string> = new Set([
  T.InfraMachine,
  T.InfraMachineStatus,
  T.InfraMachineRegistration,
  T.MachineRequest,
  T.MachineRequestStatus,
  T.MachineRequestSet,
  T.Machine,
]);

/** Whether --wait has nothing left to wait for: nothing to release, nothing in use, (deregistering) deregistered. */
export function finishedWaiting(plan: Plan, whole: boolean, deregister: boolean): boolean {
  if (plan.items.length > 0 || plan.running.length > 0) return false;
  if (!whole) return true;
  if (deregister) return plan.deregistration.status === 'done';
  return plan.refusals.every((r) => r.done) && !plan.deregistration.blockedBy.some((type) => MACHINE_FACTS.has(type));
}

/** Whether the plan leaves the run nothing to write but the deregistration (of a whole-provider run). */
function nothingButDeregistration(plan: Plan, whole: boolean, deregister: boolean): boolean {
  return (
    whole && deregister && plan.items.length === 0 && plan.running.length === 0 && plan.refusals.every((r) => r.done)
  );
}

/** After --timeout: whether the plan leaves nothing to do but the deregistration (which then runs in its grace). */
export function onlyDeregistrationLeft(plan: Plan, whole: boolean, deregister: boolean): boolean {
  return nothingButDeregistration(plan, whole, deregister) && plan.deregistration.status === 'ready';
}

/**
 * After --timeout: whether the deregistration only waits for Omni to destroy what the run released (nothing is left to
 * write but it): the grace waits for that too.
 */
export function onlyOmniLeft(plan: Plan, whole: boolean, deregister: boolean): boolean {
  const d = plan.deregistration.status;
  return nothingButDeregistration(plan, whole, deregister) && d !== 'ready' && d !== 'done' && d !== 'disabled';
}
