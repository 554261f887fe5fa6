// The report of `plan` (report.ts has its shape): what a run would do now, each item with its
// operations in the order a run performs them (PlannedStep), the refusals a run would write, and what
// Omni's own finalizers will do. Apart from the run's report: it is built from the plan alone.

import { ExitCode } from '../../exit-codes.js';
import type { Operation } from '../plan/operations.js';
import { targetOf } from '../plan/operations.js';
import type { Plan, PlanItem } from '../plan/plan.js';
import { immediateWrites } from '../plan/plan.js';
import type { PlannedStep, Report, ReportInputs } from './report.js';
import { deregistrationOf, noteEntry, reportHeader } from './report.js';

export function describeOp(o: Operation): PlannedStep {
  const resource = targetOf(o);
  switch (o.op) {
    case 'wipe':
      return { op: 'wipe', resource };
    case 'remove-finalizers':
      return { op: o.op, resource, finalizers: [...o.finalizers], version: o.version, phase: o.phase, why: o.why };
    case 'teardown':
    case 'destroy':
    case 'create':
      return { op: o.op, resource, owner: o.owner, why: o.why };
    case 'wait':
      return { op: o.op, resource, finalizers: [...o.finalizers], why: o.why };
    case 'get':
      return { op: o.op, resource, answered: 'NotFound', why: o.why };
    case 'check-live-provider':
      return { op: o.op, resource, why: o.why };
  }
}

/**
 * Every operation of an item in the order a run performs them (a deregistration: its check, its clean-ups, the rest).
 */
export function opsInOrder(i: PlanItem): Operation[] {
  if (i.kind !== 'deregistration' || !('cleanup' in i)) return i.ops;
  const d = i as NonNullable<Plan['deregistration']['item']>;
  return [d.check, ...d.cleanup.flatMap((c) => c.ops), ...d.ops];
}

/** The report of `plan`: what a run would do now. Exit code 0. */
export function planReport(plan: Plan, c: ReportInputs): Report {
  const items = [...plan.items, ...(plan.deregistration.item ? [plan.deregistration.item] : [])];
  return {
    ...reportHeader(plan, c, 'plan'),
    cleaned: 0,
    released: [],
    refused: plan.refusals.map((r) => ({
      kind: r.kind,
      id: r.id,
      reason: r.reason,
      result: r.done ? (r.kind === 'InfraMachine' ? 'no-finalizers' : 'already-refused') : 'would-refuse',
      ...(!r.done && r.op ? { steps: [describeOp(r.op)] } : {}),
    })),
    blocked: plan.blocked.map((n) => ({ ...noteEntry(n), counts: false })),
    running: plan.running.map(noteEntry),
    leftBehind: plan.leftBehind.map(noteEntry),
    failed: [],
    remaining: [],
    interruptedItems: [],
    notStarted: [],
    notFound: plan.notFound,
    waits: plan.waits.map(noteEntry),
    lettingGo: plan.lettingGo.map(noteEntry),
    unseen: plan.unseen.map(noteEntry),
    deregistration: deregistrationOf(plan, false, 'planned'),
    planned: {
      writes: immediateWrites(plan),
      announce: plan.announce,
      items: items.map((i) => ({ kind: i.kind, id: i.id, reason: i.reason, steps: opsInOrder(i).map(describeOp) })),
    },
    writes: {},
    timedOut: false,
    interrupted: false,
    result: 'planned',
    exitCode: ExitCode.OK,
  };
}
