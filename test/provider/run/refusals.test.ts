// Each refusal once, reported as ours (docs/design.md rule 6): a FAILED status this run wrote is never written again,
// though a pass re-plans from caches that have not yet seen it, and never reported as someone else's; a status found
// in its place (AlreadyExists) is read and attributed by its content.

import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { AlreadyExistsError } from '../../../src/omni-api/errors.js';
import { NS_INFRA_PROVIDER, T, type Resource } from '../../../src/omni-api/resource.js';
import type { State } from '../../../src/omni-api/state.js';
import { MachineRequestStage, MachineRequestStatusSpec } from '../../../src/omni-api/specs/messages.js';
import { encodeSpec } from '../../../src/omni-api/specs/codec.js';
import { INTERNAL } from '../../../src/omni-sim/api.js';
import { generateScenario, provisionedRequest } from '../../../src/omni-sim/scenario/generate.js';
import { Outcomes } from '../../../src/provider/run/outcomes.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { refuse, refusalError } from '../../../src/provider/run/refusals.js';
import type { Refusal } from '../../../src/provider/plan/plan.js';
import { reconcileOptions } from '../../helpers/provider-fixtures.js';
import { simEachTest } from '../../helpers/sim-client.js';

const ID = 'kubevirt';
const omni = simEachTest();

describe('each refusal once, reported as ours', () => {
  it('requests created in bursts while caches lag: one FAILED status Create per request, each refused', async () => {
    const sim = await omni.sim(
      generateScenario({
        providerId: ID,
        machines: 0,
        requests: 10,
        omniVersion: '1.9.3',
        faults: { latencyMs: 40, dropWatchAfterEvents: 8 },
      }),
    );
    await sim.controllers?.idle();
    const creates = new Map<string, number>();
    const client = await omni.client(sim, ID, {
      onWrite: (w) => {
        if (w.method === 'Create' && w.resource.type === T.MachineRequestStatus)
          creates.set(w.resource.id, (creates.get(w.resource.id) ?? 0) + 1);
        return () => undefined;
      },
    });
    const s = sim;
    const created: string[] = [];
    // Six bursts of five new requests, 400 ms apart, while the run releases the held ones and waits.
    const bursts = (async () => {
      for (let b = 0; b < 6; b++) {
        await new Promise((r) => setTimeout(r, 400));
        for (let i = 0; i < 5; i++) {
          const [mr] = provisionedRequest(ID, `new-${b}-${i}`, { phase: 'running', outputs: false });
          s.store.create(INTERNAL, { ...mr!, metadata: { ...mr!.metadata, owner: '', finalizers: [] } }, '');
          created.push(mr!.metadata.id);
        }
      }
    })();
    const r = await reconcile(
      { state: client.state, logger: silentLogger(), version: 'test' },
      reconcileOptions(ID, { wait: true, timeoutMs: 5_000, omniWaitMs: 5_000, settleMs: 0, concurrency: 8 }),
    );
    await bursts;
    expect(created).toHaveLength(30);
    // Each request got exactly one Create, and the run reported it as its own refusal.
    expect([...creates].filter(([, n]) => n !== 1)).toEqual([]);
    const results = new Map(r.refusals.map((x) => [x.id, x.result]));
    const refusedAtLeast = created.filter((id) => creates.has(id));
    expect(refusedAtLeast.length).toBeGreaterThan(20);
    expect(refusedAtLeast.filter((id) => results.get(id) !== 'refused')).toEqual([]);
    expect(r.refusals.filter((x) => x.result === 'already-refused' || x.result === 'status-by-other')).toEqual([]);
  }, 60_000);
});

describe('a status found in its place is read and attributed by its content', () => {
  const request = provisionedRequest(ID, 'r-1', { phase: 'running', outputs: false })[0]!;
  const refusal: Refusal = {
    kind: 'MachineRequest',
    id: 'r-1',
    reason: 'new request while the provider is decommissioned: answered with a FAILED status',
    request,
    op: {
      op: 'create',
      target: { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: 'r-1' },
      owner: `${ID}.ProvisionController`,
      why: 'test',
    },
    done: false,
  };
  const status = (error: string, owner: string): Resource => ({
    metadata: { ...request.metadata, type: T.MachineRequestStatus, owner, phase: 'running', finalizers: [] },
    spec: {
      protoSpec: encodeSpec(MachineRequestStatusSpec, { id: '', stage: MachineRequestStage.FAILED, error, status: '' }),
    },
  });
  /** refuse() against a State whose Create answers AlreadyExists and whose Get finds `found`. */
  async function refuseWith(found: Resource | undefined) {
    const state = {
      create: () => Promise.reject(new AlreadyExistsError('exists')),
      get: () => (found ? Promise.resolve(found) : Promise.reject(new Error('unexpected'))),
    } as unknown as State;
    const outcomes = new Outcomes({ log: silentLogger() });
    const observed: Resource[] = [];
    await refuse(
      {
        state,
        providerId: ID,
        outcomes,
        log: silentLogger(),
        reads: { observe: (r) => observed.push(r) },
        refused: new Set(),
      },
      refusal,
    );
    return { outcome: outcomes.refusals.get('MachineRequest/r-1'), observed };
  }

  it("our marker (an earlier run's refusal): already-refused, said so", async () => {
    const { outcome, observed } = await refuseWith(status(refusalError(ID, 'r-1'), `${ID}.ProvisionController`));
    expect(outcome).toMatchObject({
      result: 'already-refused',
      reason: expect.stringMatching(/earlier run of stub-provider/),
    });
    expect(observed).toHaveLength(1);
  });

  it("another owner's status (the provider may be back): status-by-other, naming it, left alone", async () => {
    const { outcome } = await refuseWith(status('', `${ID}.SomeOtherController`));
    expect(outcome).toMatchObject({
      result: 'status-by-other',
      reason: expect.stringContaining(`${ID}.SomeOtherController`),
    });
  });
});
