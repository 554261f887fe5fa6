// `stub-provider demo`: the whole story against the embedded simulated Omni, through the same code
// the real commands run (command lines parsed by the CLI's parser, executePlan / executeRun over
// HTTP with the sim's generated keys), narrated for a person. Each step checks what a user would
// notice in Omni (the dump of the sim's store), so the demo fails loudly if the product stops doing
// what it shows.

import type { Resource } from '../../omni-api/resource.js';
import { NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T, providerNamespace } from '../../omni-api/resource.js';
import { MachineRequestStage, MachineRequestStatusSpec } from '../../omni-api/specs/messages.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { INTERNAL } from '../../omni-sim/api.js';
import { createSim } from '../../omni-sim/index.js';
import type { Sim } from '../../omni-sim/index.js';
import type { Report } from '../../provider/report/report.js';
import { Narration, find } from './narration.js';
import type { DemoOptions, DemoStep } from './narration.js';
import { DEMO, demoScenario } from './scenario.js';

export interface DemoResult {
  omniVersion: string;
  steps: DemoStep[];
  /** Facts read back from the simulated Omni; all true when the demo worked. */
  checks: Record<string, boolean>;
  lastSteps: string[];
  warnings: string[];
  ok: boolean;
}

export async function runDemo(o: DemoOptions): Promise<{ result: DemoResult; sim: Sim }> {
  const now = o.now ?? (() => Date.now());
  const sim = await createSim(demoScenario(o.omniVersion, now()));
  try {
    return { result: await story(sim, o), sim };
  } catch (err) {
    await sim.close();
    throw err;
  }
}

/** The simulated Omni's controllers, which the story drives as an operator would (deleting, scaling down). */
type Controllers = NonNullable<Sim['controllers']>;

async function story(sim: Sim, o: DemoOptions): Promise<DemoResult> {
  const controllers = sim.controllers;
  if (!controllers) throw new Error("the demo needs the simulated Omni's controllers");
  const d = new Narration(sim, o);
  await controllers.idle();
  introduce(d);
  await whileOffline(d, controllers);
  await rehearse(d);
  const second = await releaseBareMetal(d, controllers);
  const kv2 = await releaseKubevirt(d, controllers);
  const { lastSteps, warnings } = lastStep(d, [second, kv2]);
  const ok = Object.values(d.checks).every(Boolean);
  d.say(
    ok
      ? '\nDemo finished: every check passed.'
      : `\nDemo FAILED: ${Object.entries(d.checks)
          .filter(([, v]) => !v)
          .map(([k]) => k)
          .join(', ')}`,
  );
  return { omniVersion: sim.omniVersion, steps: d.steps, checks: d.checks, lastSteps, warnings, ok };
}

/** Who is there: a simulated Omni with two providers whose processes are gone. */
function introduce(d: Narration): void {
  const { bareMetal: bm, kubevirt: kv } = DEMO;
  d.say(
    `A simulated Omni ${d.sim.omniVersion} is listening on ${d.sim.endpoint}, with two infra providers whose ` +
      `processes are gone:`,
  );
  d.say(
    `  - ${bm} (static, bare metal): machine ${DEMO.stuckMachine} was deleted while the provider was down and is stuck`,
  );
  d.say(`    tearing down on the provider's six finalizers; machine ${DEMO.runningMachine} is still in use.`);
  d.say(
    `  - ${kv} (provisioning, built on Omni's provider library): its MachineRequestSet ${DEMO.set} has one ` +
      `provisioned machine.`,
  );
  d.say('Both are still registered; their last heartbeats are days old, so the stub may stand in for them.');
}

/** Steps 1 and 2: what Omni shows before anything happens; kubevirt scaled down and asked for a new machine. */
async function whileOffline(d: Narration, controllers: Controllers): Promise<void> {
  const { bareMetal: bm, kubevirt: kv } = DEMO;
  d.step(`What Omni holds for ${bm}`);
  d.view(bm);

  d.step(`The operator scales ${DEMO.set} down to 0 and a new MachineRequest arrives, while ${kv} is offline`);
  controllers.scaleDown(DEMO.set, 0);
  controllers.createMachineRequest({ providerId: kv, id: DEMO.newRequest, talosVersion: 'v1.9.5' });
  await controllers.idle();
  d.view(kv);
  const scaled = find(d.sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.scaledDownRequest);
  d.check(
    'requestStuck',
    scaled?.metadata.phase === 'tearingDown' && scaled.metadata.finalizers.includes(`${kv}.ProvisionController`),
    `MachineRequest ${DEMO.scaledDownRequest} is tearing down, held by ${kv}.ProvisionController: nobody is there to ` +
      `release it`,
  );
}

/** Step 3: plan is read-only. */
async function rehearse(d: Narration): Promise<void> {
  const bm = DEMO.bareMetal;
  const before = d.sim.dump();
  await d.plan(d.step(`Rehearse: what would the stub do for ${bm}? (read-only)`, `stub-provider plan --id ${bm}`), bm);
  d.check('planWroteNothing', d.sim.dump() === before, 'plan changed nothing in Omni');
}

/**
 * Steps 4 and 5: the stub for bare-metal releases the stuck machine and leaves the running one alone; once the
 * operator deletes that one too, the stub finishes it and deregisters. The second run's report.
 */
async function releaseBareMetal(d: Narration, controllers: Controllers): Promise<Report> {
  const { sim } = d;
  const bm = DEMO.bareMetal;
  const runningBefore = JSON.stringify(find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.runningMachine));
  const first = await d.run(`Run the stub as ${bm}`, bm);
  d.check(
    'stuckReleased',
    allGone(sim, bm, DEMO.stuckMachine, [T.InfraMachine, T.InfraMachineStatus]),
    `machine ${DEMO.stuckMachine} is released: its InfraMachine, InfraMachineStatus and the provider's five ` +
      `resources are gone`,
  );
  d.check(
    'runningUntouched',
    JSON.stringify(find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.runningMachine)) === runningBefore &&
      first.running.some((r) => r.id === DEMO.runningMachine),
    `machine ${DEMO.runningMachine} is still running, its finalizers untouched (reported, not counted as a failure)`,
  );
  d.check(
    'notDeregisteredWhileInUse',
    first.deregistration.status !== 'deregistered' &&
      find(sim, NS_INFRA_PROVIDER, T.InfraProviderStatus, bm) !== undefined,
    `${bm} stays registered while one of its machines is in use`,
  );

  d.step(
    `The operator deletes machine ${DEMO.runningMachine} in Omni (UI, or omnictl delete link ${DEMO.runningMachine})`,
  );
  controllers.deleteMachine(DEMO.runningMachine);
  await controllers.idle();
  d.view(bm);
  const second = await d.run(`Run the stub as ${bm} again`, bm);
  d.check(
    'secondReleased',
    second.released.some((r) => r.id === DEMO.runningMachine) &&
      find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.runningMachine) === undefined,
    `machine ${DEMO.runningMachine} is released`,
  );
  checkDeregistered(d, bm, second);
  return second;
}

/**
 * Steps 6 and 7: the stub for kubevirt releases the scaled-down request and refuses the new one; once the operator
 * deletes the refused request, the last run cleans its status and deregisters. The last run's report.
 */
async function releaseKubevirt(d: Narration, controllers: Controllers): Promise<Report> {
  const { sim } = d;
  const kv = DEMO.kubevirt;
  const kv1 = await d.run(`Run the stub as ${kv}`, kv);
  d.check(
    'requestReleased',
    allGone(sim, kv, DEMO.scaledDownRequest, [T.MachineRequest, T.MachineRequestStatus]),
    `MachineRequest ${DEMO.scaledDownRequest} is released: request, status, state resource and ConfigPatchRequest ` +
      `are gone`,
  );
  const refusal = find(sim, NS_INFRA_PROVIDER, T.MachineRequestStatus, DEMO.newRequest);
  const refusedSpec = refusal ? decodeSpec(MachineRequestStatusSpec, refusal.spec.protoSpec).value : undefined;
  d.check(
    'newRequestRefused',
    kv1.refused.some((r) => r.id === DEMO.newRequest && r.result === 'refused') &&
      refusedSpec?.stage === MachineRequestStage.FAILED &&
      refusedSpec.error.startsWith('stub-provider'),
    `MachineRequest ${DEMO.newRequest} is refused: its status says FAILED, "${refusedSpec?.error ?? ''}"`,
  );

  d.step(`The operator deletes the refused request (omnictl delete machinerequest ${DEMO.newRequest})`);
  const req = find(sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.newRequest);
  if (req) {
    // omnictl delete tears down, then destroys once Omni's own finalizers have let go.
    sim.store.teardown(INTERNAL, req.metadata, req.metadata.owner);
    await controllers.idle();
    const torn = find(sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.newRequest);
    if (torn) sim.store.destroy(INTERNAL, torn.metadata, torn.metadata.owner);
  }
  await controllers.idle();
  d.view(kv);
  const kv2 = await d.run(`Run the stub as ${kv} again`, kv);
  checkDeregistered(d, kv, kv2);
  return kv2;
}

/** The last step, an Omni admin's: the registrations, which the stub never deletes. */
function lastStep(d: Narration, finalRuns: Report[]): { lastSteps: string[]; warnings: string[] } {
  const lastSteps = finalRuns.map((r) => r.deregistration.lastStep).filter((x): x is string => typeof x === 'string');
  const warnings = [
    ...new Set(finalRuns.map((r) => r.deregistration.warning).filter((x): x is string => typeof x === 'string')),
  ];
  d.step('Last step, for an Omni admin: delete the registrations');
  for (const l of lastSteps) d.say(`   $ ${l}`);
  for (const w of warnings) d.say(`   Warning: ${w}`);
  d.check(
    'registrationsKept',
    [DEMO.bareMetal, DEMO.kubevirt].every((id) => find(d.sim, NS_INFRA_PROVIDER, T.InfraProvider, id) !== undefined),
    'the registrations themselves are left for the admin (the stub never deletes them)',
  );
  return { lastSteps, warnings };
}

/** Nothing of `id` left: none of `types` by that ID in the shared namespace, nothing of it in the provider's own. */
function allGone(sim: Sim, providerId: string, id: string, types: string[]): boolean {
  return (
    types.every((type) => find(sim, NS_INFRA_PROVIDER, type, id) === undefined) &&
    !sim.store
      .all()
      .some((r: Resource) => r.metadata.namespace === providerNamespace(providerId) && r.metadata.id === id)
  );
}

function checkDeregistered(d: Narration, id: string, rep: Report): void {
  const left = d.sim.store.all().filter((r) => r.metadata.namespace === providerNamespace(id));
  d.check(`${id}:namespaceEmpty`, left.length === 0, `namespace ${providerNamespace(id)} is empty`);
  const statuses = [
    find(d.sim, NS_INFRA_PROVIDER, T.InfraProviderStatus, id),
    find(d.sim, NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, id),
  ];
  d.check(
    `${id}:deregistered`,
    rep.deregistration.status === 'deregistered' && statuses.every((s) => s === undefined),
    `${id} is deregistered: its ProviderStatus and ProviderHealthStatus are gone`,
  );
}
