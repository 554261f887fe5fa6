// The plan is the program: over random fleets, the writes a run makes, as the
// double's write observer hears them (not as the executor says), are exactly the operations `plan`
// prints, item by item and in order, and nothing else. Where Omni keeps holding a resource the run
// waits for, the item stops at that wait, so what it performed is the printed operations up to it.
// A run plans again after Omni destroyed what it released (and before deregistering after an
// announcement): the operations of those passes are the plans printed at that moment.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import { build, stateArb } from '../helpers/fleet-arbitrary.js';
import type { Input } from '../helpers/fleet-arbitrary.js';
import {
  bareMetalMachine,
  healthStatus,
  omniMachine,
  providerStatus,
  provisionedRequest,
} from '../helpers/provider-fixtures.js';
import type { Pointer, Resource } from '../../src/omni-api/resource.js';
import { T, describePointer } from '../../src/omni-api/resource.js';
import type { WriteIntent, WriteObserver } from '../../src/omni-client/write/observer.js';
import { silentLogger } from '../../src/log.js';
import { buildPlan } from '../../src/provider/plan/planner.js';
import type { Plan } from '../../src/provider/plan/plan.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import { planReport } from '../../src/provider/report/plan-report.js';
import type { PlannedStep, Report } from '../../src/provider/report/report.js';
import { takeSnapshot } from '../../src/provider/read/snapshot.js';

const ID = 'bm';
/**
 * Finalizers of others on a machine, a request or their status: Omni's that let go (on teardown, or once alone), and
 * holds that never clear here.
 */
const FOREIGN = [
  'ClusterMachineRequestStatusController',
  'MachineStatusController',
  'MachineRequestStatusCleanupController',
  'MachineSetNodeController',
  'other.ProvisionController',
];

interface Ours {
  kind: 'static' | 'request';
  phase: 'running' | 'tearingDown';
  /** Our finalizers still on the machine or request (an earlier run may have removed them). */
  ours: boolean;
  /** Which of its resources are left (bit mask over the outputs); the parent itself may be gone. */
  keep: number;
  parentGone: boolean;
  foreign: string[];
  statusForeign: string[];
  /** A request's status names a machine, and that machine is still in Omni. */
  machineInOmni: boolean;
}

const oursArb: fc.Arbitrary<Ours> = fc.record({
  kind: fc.constantFrom('static' as const, 'request' as const),
  phase: fc.constantFrom('running' as const, 'tearingDown' as const, 'tearingDown' as const),
  ours: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  keep: fc.integer({ min: 0, max: 127 }),
  parentGone: fc.oneof({ weight: 4, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  foreign: fc.uniqueArray(fc.constantFrom(...FOREIGN), { maxLength: 2 }),
  statusForeign: fc.uniqueArray(fc.constantFrom(...FOREIGN), { maxLength: 2 }),
  machineInOmni: fc.boolean(),
});

/** Fleets of one provider, built from what real providers leave behind, with the variations above. */
const fleetArb = fc.record({
  machines: fc.array(oursArb, { maxLength: 6 }),
  providerStatus: fc.boolean(),
  heartbeat: fc.boolean(),
  perMachine: fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.uniqueArray(fc.constantFrom('m0', 'm1', 'm3', 'zz'), { minLength: 1, maxLength: 2 }) },
  ),
  deregister: fc.boolean(),
});

function fleet(f: { machines: Ours[]; providerStatus: boolean; heartbeat: boolean }): Resource[] {
  const out: Resource[] = [];
  if (f.providerStatus) out.push(providerStatus(ID, true));
  if (f.heartbeat) out.push(healthStatus(ID, Date.now() - 600_000));
  f.machines.forEach((m, i) => {
    const id = `m${i}`;
    const rs =
      m.kind === 'static'
        ? bareMetalMachine(ID, id, { phase: m.phase })
        : provisionedRequest(ID, id, { phase: m.phase, ...(m.machineInOmni ? { machineUuid: `u${i}` } : {}) });
    const [parent, ...rest] = rs;
    const p = parent!;
    p.metadata.finalizers = [
      ...(m.ours ? p.metadata.finalizers.filter((x) => x.startsWith(`${ID}.`)) : []),
      ...m.foreign,
    ];
    if (!m.parentGone) out.push(p);
    rest.forEach((r, j) => {
      if (!(m.keep & (1 << j))) return;
      if (r.metadata.type === T.InfraMachineStatus || r.metadata.type === T.MachineRequestStatus)
        r.metadata.finalizers = [...m.statusForeign];
      out.push(r);
    });
    if (m.kind === 'request' && m.machineInOmni) out.push(omniMachine(ID, `u${i}`, { request: id }));
  });
  return out;
}

/** One write as the double heard it, in the words of a printed operation. */
interface Performed {
  op: string;
  resource: string;
  finalizers?: string[];
  owner?: string;
}

const WRITES = new Set(['remove-finalizers', 'teardown', 'destroy', 'create']);
const isProviderRecord = (p: Pointer) => p.type === T.InfraProviderStatus || p.type === T.InfraProviderHealthStatus;

/**
 * The double's writes that succeeded, classified from what was sent alone: an Update that moves
 * `running` to `tearingDown` is a teardown, one that drops finalizers removes them; the
 * announcement's and the heartbeats' upserts of the provider's own records are not plan operations
 * (their Destroys, the deregistration's, are).
 */
function recorder(): { observer: WriteObserver; performed: Performed[] } {
  const performed: Performed[] = [];
  const observer: WriteObserver = (intent: WriteIntent) => (outcome) => {
    if (outcome.result !== 'ok') return;
    const resource = describePointer(intent.resource);
    if (intent.method === 'Destroy') {
      performed.push({ op: 'destroy', resource, owner: intent.owner });
      return;
    }
    if (isProviderRecord(intent.resource)) return;
    if (intent.method === 'Create') {
      performed.push({ op: 'create', resource, owner: intent.owner });
      return;
    }
    const sent = intent.sent!.metadata;
    if (intent.expectedPhase === 'running' && sent.phase === 'tearingDown') {
      performed.push({ op: 'teardown', resource, owner: intent.owner });
      return;
    }
    const removed = (intent.before?.metadata.finalizers ?? []).filter((f) => !sent.finalizers.includes(f));
    performed.push({ op: 'remove-finalizers', resource, finalizers: removed });
  };
  return { observer, performed };
}

const key = (s: Performed) => JSON.stringify([s.op, s.resource, s.finalizers ?? null, s.owner ?? null]);
const asPerformed = (s: PlannedStep): Performed => ({
  op: s.op,
  resource: s.resource,
  ...(s.finalizers ? { finalizers: s.finalizers } : {}),
  ...(s.owner !== undefined ? { owner: s.owner } : {}),
});

/**
 * What a run performs of a printed plan: every item's writes in order, up to a wait for a resource
 * that others still hold once the run is over (Omni did not let go: the item stopped there); the
 * deregistration's last writes only when none of its clean-ups stopped; each refusal's Create.
 */
function expectedOf(rep: Report, stillHeld: (resource: string) => boolean): Performed[][] {
  const upToHeld = (steps: PlannedStep[]) => {
    const i = steps.findIndex((s) => s.op === 'wait' && stillHeld(s.resource));
    return {
      steps: (i < 0 ? steps : steps.slice(0, i)).filter((s) => WRITES.has(s.op)).map(asPerformed),
      stopped: i >= 0,
    };
  };
  const out: Performed[][] = [];
  for (const item of rep.planned!.items) {
    if (item.kind !== 'deregistration') {
      out.push(upToHeld(item.steps).steps);
      continue;
    }
    // A deregistration: its check, its clean-ups (one resource each) at once, then the statuses.
    const byResource = new Map<string, PlannedStep[]>();
    for (const s of item.steps)
      if (s.op !== 'check-live-provider' && !isProviderRecord(pointerOf(s.resource)))
        byResource.set(s.resource, [...(byResource.get(s.resource) ?? []), s]);
    const cleanups = [...byResource.values()].map(upToHeld);
    out.push(...cleanups.map((c) => c.steps));
    if (!cleanups.some((c) => c.stopped))
      out.push(
        upToHeld(item.steps.filter((s) => s.op !== 'check-live-provider' && isProviderRecord(pointerOf(s.resource))))
          .steps,
      );
  }
  for (const r of rep.refused) if (r.steps) out.push(r.steps.map(asPerformed));
  return out;
}

function pointerOf(resource: string): Pointer {
  const [namespace = '', type = '', ...id] = resource.split('/');
  return { namespace, type, id: id.join('/') };
}

async function printed(state: FakeState, inp: Input): Promise<Report> {
  const snap = await takeSnapshot(state, { providerId: inp.target, profile: 'auto', stateTypes: [] });
  return planReport(
    buildPlan(snap, {
      providerId: inp.target,
      machines: inp.perMachine ?? [],
      deregister: inp.deregister,
      wipe: false,
    }),
    { version: 't' },
  );
}

/** The two hold the same writes (each once), and every sequence of `expected` was performed in its order. */
function agree(performed: Performed[], expected: Performed[][]): void {
  const keys = performed.map(key);
  expect(new Set(keys).size).toBe(keys.length);
  expect([...keys].sort()).toEqual(expected.flat().map(key).sort());
  for (const seq of expected) {
    const at = seq.map((s) => keys.indexOf(key(s)));
    expect(at, JSON.stringify(seq)).toEqual([...at].sort((a, b) => a - b));
  }
}

async function check(resources: Resource[], inp: Input): Promise<{ writes: number; passes: number }> {
  const shown = await printed(new FakeState(resources), inp);
  const state = new FakeState(resources);
  const { observer, performed } = recorder();
  state.onWrite = observer;
  const plans: Plan[] = [];
  const r = await reconcile(
    { state, logger: silentLogger(), version: 't', planned: (p) => plans.push(p) },
    {
      providerId: inp.target,
      machines: inp.perMachine ?? [],
      profile: 'auto',
      stateTypes: [],
      deregister: inp.deregister,
      wait: false,
      timeoutMs: 1000,
      omniWaitMs: 30,
      settleMs: 0,
      concurrency: 4,
    },
  );
  // The run's first plan is the one `plan` printed.
  expect(planReport(r.firstPlan, { version: 't' }).planned).toEqual(shown.planned);
  const stillHeld = (resource: string) => (state.find(pointerOf(resource))?.metadata.finalizers.length ?? 0) > 0;
  // Each pass performs the plan printed for it (a run plans again only where Omni acted first).
  agree(
    performed,
    plans.flatMap((p) => expectedOf(planReport(p, { version: 't' }), stillHeld)),
  );
  return { writes: performed.length, passes: plans.length };
}

describe('the plan is the program', () => {
  it('random fleets of one provider: a run writes exactly what plan prints, in order, nothing else', async () => {
    const seen = { writes: 0, multiPass: 0 };
    await fc.assert(
      fc.asyncProperty(fleetArb, async (f) => {
        const got = await check(fleet(f), {
          target: ID,
          machines: [],
          orphans: [],
          perMachine: f.perMachine,
          deregister: f.deregister,
        });
        seen.writes += got.writes;
        if (got.passes > 1) seen.multiPass++;
      }),
      { numRuns: 200 },
    );
    // Not vacuous: the fleets make the runs write, and plan again after Omni destroyed what they released.
    expect(seen.writes).toBeGreaterThan(400);
    expect(seen.multiPass).toBeGreaterThan(3);
  }, 120_000);

  it('over random fleets of several providers whose IDs look alike, likewise', async () => {
    await fc.assert(
      fc.asyncProperty(stateArb, async (inp) => {
        await check(build(inp.machines, inp.orphans), inp);
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
