// Safety properties over random Omni states (several providers whose IDs are prefixes of each other
// or differ only in case, Omni's finalizers, running and tearing-down mixes): the plan never removes a
// finalizer that is not ours, never acts on a running machine, never adds a finalizer; applying it and
// planning again yields nothing more to do.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import { OMNI, build, stateArb } from '../helpers/fleet-arbitrary.js';
import type { Input } from '../helpers/fleet-arbitrary.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { LABEL_MACHINE_REQUEST, T } from '../../src/omni-api/resource.js';
import { takeSnapshot } from '../../src/provider/read/snapshot.js';
import { buildPlan } from '../../src/provider/plan/planner.js';
import { immediateWrites } from '../../src/provider/plan/plan.js';
import type { Plan } from '../../src/provider/plan/plan.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import { silentLogger } from '../../src/log.js';

// Independent oracles of design rule 1 (not the code under test).
function isOurFinalizer(f: string, id: string): boolean {
  const rest = f.slice(id.length + 1);
  return f.slice(0, id.length + 1) === `${id}.` && rest !== '' && !rest.includes('.');
}
function isOurResource(md: { namespace: string; labels: Record<string, string> }, id: string): boolean {
  return md.namespace === `infra-provider:${id}` || md.labels['omni.sidero.dev/infra-provider-id'] === id;
}

async function planOf(state: FakeState, inp: Input): Promise<Plan> {
  const snap = await takeSnapshot(state, { providerId: inp.target, profile: 'auto', stateTypes: [] });
  return buildPlan(snap, {
    providerId: inp.target,
    machines: inp.perMachine ?? [],
    deregister: inp.deregister,
    wipe: false,
  });
}

/** The IDs of InfraMachines and MachineRequests of ours that are running. */
function runningParents(rs: Resource[], id: string): Set<string> {
  return new Set(
    rs
      .filter(
        (r) =>
          (r.metadata.type === T.InfraMachine || r.metadata.type === T.MachineRequest) &&
          r.metadata.phase === 'running' &&
          isOurResource(r.metadata, id),
      )
      .map((r) => r.metadata.id),
  );
}

describe('plan safety properties', () => {
  it('removes only our finalizers from our resources, never acts on running machines, never adds one', async () => {
    await fc.assert(
      fc.asyncProperty(stateArb, async (inp) => {
        const resources = build(inp.machines, inp.orphans);
        const plan = await planOf(new FakeState(resources), inp);
        const running = runningParents(resources, inp.target);
        const d = plan.deregistration.item;
        const ops = [...plan.items, ...(d ? [...d.cleanup, d] : [])].flatMap((i) => i.ops);
        const read = new Map(resources.map((r) => [`${r.metadata.namespace}/${r.metadata.type}/${r.metadata.id}`, r]));
        for (const s of ops) {
          if (s.op === 'wipe' || s.op === 'get') continue;
          const r = read.get(`${s.target.namespace}/${s.target.type}/${s.target.id}`);
          if (!r && (s.target.type === T.InfraProviderHealthStatus || s.target.type === T.InfraProviderStatus))
            continue;
          const md = r!.metadata;
          expect(isOurResource(md, inp.target)).toBe(true);
          if (s.op === 'remove-finalizers') {
            // As read: at its version, in its phase.
            expect([s.version, s.phase]).toEqual([md.version, md.phase]);
            for (const f of s.finalizers) {
              expect(isOurFinalizer(f, inp.target)).toBe(true);
              expect(md.finalizers).toContain(f);
            }
          }
          if (s.op === 'destroy' || s.op === 'teardown') expect(s.owner).toBe(md.owner);
          if (md.type === T.InfraMachine || md.type === T.MachineRequest)
            expect([s.op, md.phase]).toEqual(['remove-finalizers', 'tearingDown']);
          const parent = md.labels[LABEL_MACHINE_REQUEST] ?? md.id;
          expect(running.has(parent)).toBe(false);
          if (inp.perMachine)
            expect((inp.perMachine as readonly string[]).includes(parent) || md.type === T.BMCConfig).toBe(true);
        }
        if (inp.perMachine) {
          expect(plan.announce).toBe(false);
          expect(plan.refusals).toEqual([]);
          expect(plan.deregistration.item).toBeUndefined();
        }
      }),
      { numRuns: 400 },
    );
  });

  it('applied against a State, touches nothing foreign; planning again finds nothing more to do', async () => {
    await fc.assert(
      fc.asyncProperty(stateArb, async (inp) => {
        const resources = build(inp.machines, inp.orphans);
        const state = new FakeState(resources);
        const running = runningParents(resources, inp.target);
        await reconcile(
          { state, logger: silentLogger(), version: 't' },
          {
            providerId: inp.target,
            machines: inp.perMachine ?? [],
            profile: 'auto',
            stateTypes: [],
            deregister: inp.deregister,
            wait: false,
            timeoutMs: 1000,
            omniWaitMs: 20,
            settleMs: 20,
            concurrency: 4,
          },
        );
        for (const w of state.writes) {
          const md = (w.before ?? w.after)!.metadata;
          const writtenType = w.pointer.type;
          // Our writes only: the announcement, the heartbeat, refusals and our own resources.
          const ownProviderRecord =
            (writtenType === T.InfraProviderStatus || writtenType === T.InfraProviderHealthStatus) &&
            w.pointer.id === inp.target;
          expect(ownProviderRecord || isOurResource(md, inp.target) || w.method === 'create').toBe(true);
          if (w.method === 'create') {
            expect(w.after!.metadata.finalizers).toEqual([]);
            continue;
          }
          if (w.method === 'update' && w.before && w.after) {
            const removed = w.before.metadata.finalizers.filter((f) => !w.after!.metadata.finalizers.includes(f));
            for (const f of removed) expect(isOurFinalizer(f, inp.target)).toBe(true);
            for (const f of w.after.metadata.finalizers) expect(w.before.metadata.finalizers).toContain(f);
            if (removed.length > 0 && (md.type === T.InfraMachine || md.type === T.MachineRequest))
              expect(w.before.metadata.phase).toBe('tearingDown');
          }
          if (!ownProviderRecord) {
            const parent = md.labels[LABEL_MACHINE_REQUEST] ?? md.id;
            expect(
              running.has(parent) &&
                md.type !== T.InfraMachine &&
                md.type !== T.MachineRequest &&
                w.method === 'destroy',
            ).toBe(false);
          }
        }
        // Resources of other providers are exactly as they were.
        const providerRecord = (r: Resource) =>
          r.metadata.type === T.InfraProviderStatus || r.metadata.type === T.InfraProviderHealthStatus;
        // Compared without what the store sets itself (version, timestamps).
        const foreign = (rs: Resource[]) =>
          rs
            .filter((r) => !isOurResource(r.metadata, inp.target) && !providerRecord(r))
            .map((r) => JSON.stringify({ ...r.metadata, version: '', created: undefined, updated: undefined }))
            .sort();
        const omniTouched = (r: Resource) => r.metadata.finalizers.some((f) => OMNI.includes(f));
        expect(foreign(state.all().filter((r) => !omniTouched(r)))).toEqual(
          foreign(resources.filter((r) => !omniTouched(r)).filter((r) => state.find(r.metadata))),
        );
        const again = await planOf(state, inp);
        expect(immediateWrites(again)).toBe(0);
      }),
      { numRuns: 250 },
    );
  });
});
