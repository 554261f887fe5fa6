// PURE: the deregistration part of the plan (design rule 10): whether nothing of the provider is
// left in use, why not, and what deregistering destroys, in which order.

import type { Pointer, Resource } from '../../omni-api/resource.js';
import {
  LABEL_MACHINE_REQUEST,
  LABEL_MACHINE_REQUEST_SET,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  PHASE_RUNNING,
  T,
  describePointer,
} from '../../omni-api/resource.js';
import type { Operation } from './operations.js';
import { deleteWarning, kindOf, parentsOf, releasesCompletely } from './facts.js';
import type { Deregistration, DeregistrationItem, Note, PlanItem, PlanOptions, Snapshot } from './plan.js';

/** What deregistration reads of the plan being drawn up (draft.ts) once every item is planned, and asks of it. */
export interface PlanSoFar {
  readonly id: string;
  readonly whole: boolean;
  readonly s: Snapshot;
  readonly o: PlanOptions;
  readonly items: readonly PlanItem[];
  /** Deregistration adds the Machines that keep it waiting. */
  readonly blocked: Note[];
  readonly imById: ReadonlyMap<string, Resource>;
  readonly mrById: ReadonlyMap<string, Resource>;
  /** The per-item resources left (statuses, ConfigPatchRequests, the provider's namespace). */
  perItem(): Resource[];
  confirmedGone(ps: Iterable<Pointer>, why: string): Operation[];
  dispose(r: Resource, why: string): Operation[];
}

export function planDeregistration(p: PlanSoFar): Deregistration {
  const lastStep = `omnictl infraprovider delete ${p.id}`;
  const warning = deleteWarning(p.s.omniVersion);
  const base = { lastStep, ...(warning ? { warning } : {}) };
  if (!p.whole)
    return {
      status: 'per-machine',
      reasons: ['per-machine mode: the provider stays registered for when it comes back'],
      blockedBy: [],
      ...base,
    };
  const reasons: string[] = [];
  const blockedBy = new Set<string>();
  const block = (type: string, reason: string) => {
    reasons.push(reason);
    blockedBy.add(type);
  };
  // What this plan releases and nobody else holds, Omni destroys right after: it does not block.
  const releasing = new Set(p.items.filter(releasesCompletely).map((i) => `${i.kind}/${i.id}`));
  const count = (kind: string, rs: Resource[]) => {
    const n = rs.filter((r) => releasing.has(`${kind}/${r.metadata.id}`)).length;
    return { releasing: n, other: rs.length - n };
  };
  const ims = count('InfraMachine', p.s.infraMachines);
  const mrs = count('MachineRequest', p.s.machineRequests);
  if (ims.other > 0) block(T.InfraMachine, `${ims.other} InfraMachine(s) of ${p.id} still exist`);
  if (mrs.other > 0) block(T.MachineRequest, `${mrs.other} MachineRequest(s) of ${p.id} still exist`);
  for (const u of p.s.unreadable) block(u.type, `cannot read ${u.type} to check that no machine is left: ${u.error}`);
  // Positive evidence (design rule 10): a List that left out what a Get then found is not complete,
  // and what is left in our namespace may be destroyed only once each parent it names is gone.
  for (const r of p.s.missedByList) {
    block(
      r.metadata.type,
      `${kindOf(r)} ${r.metadata.id} was not in its List, but a Get of its ID found it: the Lists of this pass are ` +
        `not complete`,
    );
  }
  for (const [type, reason] of unconfirmedParents(p)) block(type, reason);
  for (const m of p.s.machines) {
    const note = machineNote(p, m);
    block(T.Machine, `Machine ${m.metadata.id}: ${note.reason}`);
    p.blocked.push(note);
  }
  const blockers = { reasons, blockedBy: [...blockedBy] };
  if (!p.o.deregister) return { status: 'disabled', ...blockers, reasons: ['--no-deregister', ...reasons], ...base };
  if (reasons.length > 0) return { status: 'not-ready', ...blockers, ...base };
  if (ims.releasing + mrs.releasing > 0) {
    const what = [
      ims.releasing ? `${ims.releasing} InfraMachine(s)` : '',
      mrs.releasing ? `${mrs.releasing} MachineRequest(s)` : '',
    ]
      .filter(Boolean)
      .join(' and ');
    return {
      status: 'after-releases',
      reasons: [
        `follows once the releases above are done: Omni then destroys the ${what} of ${p.id}, and nothing else of ` +
          `the provider is in use`,
      ],
      blockedBy: [],
      ...base,
    };
  }
  const item = deregistrationItem(p);
  if (!item) return { status: 'done', reasons: ['nothing of the provider is left in Omni'], blockedBy: [], ...base };
  return { status: 'ready', reasons: [], blockedBy: [], ...base, item };
}

/**
 * The heartbeat check first; then at once, each its own clean-up, what is left of the provider;
 * then, in order, the heartbeat and the ProviderStatus, last.
 */
function deregistrationItem(p: PlanSoFar): DeregistrationItem | undefined {
  const why = 'deregistration: nothing of the provider is left in use';
  const cleanup = p.perItem().map((r) => ({
    kind: 'leftover' as const,
    id: r.metadata.id,
    reason: why,
    ops: [
      ...p.confirmedGone(parentsOf(r, p.s.profile), 'named by what deregistration destroys: gone'),
      ...p.dispose(r, r.metadata.namespace === NS_INFRA_PROVIDER ? why : `${why}: emptying infra-provider:${p.id}`),
    ],
  }));
  const ops: Operation[] = [];
  if (p.s.healthStatus) ops.push(...p.dispose(p.s.healthStatus, `${why}: the heartbeat (its beats stopped first)`));
  if (p.s.providerStatus) ops.push(...p.dispose(p.s.providerStatus, `${why}: the ProviderStatus, last`));
  if (cleanup.length === 0 && ops.length === 0) return undefined;
  const heartbeat = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: p.id };
  return {
    kind: 'deregistration',
    id: p.id,
    reason: why,
    check: { op: 'check-live-provider', target: heartbeat, why: 'no live provider came back (design rule 7)' },
    cleanup,
    ops,
  };
}

/** Parents named by what deregistration would destroy, neither listed nor confirmed gone by a Get. */
/** Each parent of a resource left that no Get confirmed gone: its type, and the reason. */
function unconfirmedParents(p: PlanSoFar): [string, string][] {
  const out = new Map<string, [string, string]>();
  for (const r of p.perItem()) {
    for (const parent of parentsOf(r, p.s.profile)) {
      if ((parent.type === T.InfraMachine ? p.imById : p.mrById).has(parent.id)) continue;
      const key = describePointer(parent);
      if (!p.s.goneById.has(key) && !out.has(key)) {
        out.set(key, [
          parent.type,
          `${kindOf(parent)} ${parent.id}, named by ${describePointer(r.metadata)}, was not confirmed gone by a Get ` +
            `of its ID`,
        ]);
      }
    }
  }
  return [...out.values()];
}

function machineNote(p: PlanSoFar, m: Resource): Note {
  const uuid = m.metadata.id;
  const im = p.imById.get(uuid);
  const rid = m.metadata.labels[LABEL_MACHINE_REQUEST];
  const mr = rid !== undefined ? p.mrById.get(rid) : undefined;
  if (im && im.metadata.phase === PHASE_RUNNING) {
    return {
      kind: 'Machine',
      id: uuid,
      reason: 'its InfraMachine is still running (the machine is in use)',
      nextStep: `take it out of its cluster, then omnictl delete link ${uuid}`,
    };
  }
  if (mr && mr.metadata.phase === PHASE_RUNNING) {
    const set = mr.metadata.labels[LABEL_MACHINE_REQUEST_SET];
    return {
      kind: 'Machine',
      id: uuid,
      reason: `its MachineRequest ${mr.metadata.id} is still running`,
      nextStep: set ? `scale down MachineRequestSet ${set}` : `omnictl delete machinerequest ${mr.metadata.id}`,
    };
  }
  return {
    kind: 'Machine',
    id: uuid,
    reason: `still present (phase ${m.metadata.phase}); Omni removes it once its Link is gone`,
    nextStep: `omnictl delete link ${uuid} (on Omni before 1.4, take it out of its cluster first)`,
  };
}
