// `stub-provider demo`: the whole story against the embedded simulated Omni, through the same code
// the real commands run (command lines parsed by the CLI's parser, executePlan / executeRun over
// HTTP with the sim's generated keys), narrated for a person. Each step checks what a user would
// notice in Omni (the dump of the sim's store), so the demo fails loudly if the product stops doing
// what it shows.

import { Writable } from 'node:stream';
import type { CliContext } from '../options.js';
import { executePlan, planCommand } from '../plan.js';
import type { Io } from '../provider-options.js';
import { executeRun, runCommand } from '../run.js';
import type { Resource } from '../../omni-api/resource.js';
import { NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T, providerNamespace } from '../../omni-api/resource.js';
import { MachineRequestStage, MachineRequestStatusSpec } from '../../omni-api/specs/messages.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { INTERNAL } from '../../omni-sim/api.js';
import { createSim } from '../../omni-sim/index.js';
import type { Sim } from '../../omni-sim/index.js';
import type { Report } from '../../provider/report/report.js';
import { renderText } from '../../provider/report/text.js';
import { DEMO, demoScenario } from './scenario.js';

export interface DemoOptions {
  omniVersion: string;
  /** The CLI's parser: each step's configuration from its command line (commands/options.ts CliContext). */
  cli: CliContext;
  /** Log level of the stub's own logs (stderr). */
  logLevel: string;
  /** Colour in those logs (`--no-color`, NO_COLOR); absent: on a terminal. */
  color?: boolean;
  /** Receives the narration (text mode); nothing in JSON mode. */
  say: (text: string) => void;
  /** The terminal's columns, when the narration goes to one: the reports are wrapped to fit. */
  width?: number;
  stderr: NodeJS.WritableStream;
  /** Where SIGINT/SIGTERM reach the runs (the process in the CLI). */
  signals?: NodeJS.EventEmitter;
  now?: () => number;
}

export interface DemoStep {
  step: number;
  title: string;
  /** The equivalent command line, when the step is a stub-provider command. */
  command?: string;
  report?: Report;
}

export interface DemoResult {
  omniVersion: string;
  steps: DemoStep[];
  /** Facts read back from the simulated Omni; all true when the demo worked. */
  checks: Record<string, boolean>;
  lastSteps: string[];
  warnings: string[];
  ok: boolean;
}

const indent = (text: string, by = '    ') =>
  text
    .replace(/\n$/, '')
    .split('\n')
    .map((l) => (l === '' ? l : by + l))
    .join('\n');

function find(sim: Sim, namespace: string, type: string, id: string): Resource | undefined {
  return sim.store.peek({ namespace, type, id });
}

function describeResource(r: Resource): string {
  const fins = r.metadata.finalizers.length ? ` [${r.metadata.finalizers.join(', ')}]` : '';
  return `${r.metadata.type.split('.')[0]}/${r.metadata.id} ${r.metadata.phase}${fins}`;
}

/** What a person would look at in the UI for one provider: its machines, requests, statuses and namespace. */
function providerView(sim: Sim, id: string): string[] {
  const mine = sim.store
    .all()
    .filter(
      (r) =>
        r.metadata.namespace === providerNamespace(id) ||
        (r.metadata.labels['omni.sidero.dev/infra-provider-id'] === id && r.metadata.type !== T.ConfigPatchRequest) ||
        (r.metadata.type === T.InfraProvider && r.metadata.id === id),
    );
  const order = [
    T.InfraProvider,
    T.InfraProviderStatus,
    T.InfraProviderHealthStatus,
    T.InfraMachine,
    T.InfraMachineStatus,
    T.MachineRequest,
    T.MachineRequestStatus,
    T.Machine,
  ];
  const rank = (r: Resource) => {
    const i = order.indexOf(r.metadata.type as never);
    return i < 0 ? order.length : i;
  };
  return mine
    .sort(
      (a, b) =>
        rank(a) - rank(b) ||
        a.metadata.type.localeCompare(b.metadata.type) ||
        a.metadata.id.localeCompare(b.metadata.id),
    )
    .map(describeResource);
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

async function story(sim: Sim, o: DemoOptions): Promise<DemoResult> {
  const { bareMetal: bm, kubevirt: kv } = DEMO;
  const controllers = sim.controllers;
  if (!controllers) throw new Error("the demo needs the simulated Omni's controllers");
  const steps: DemoStep[] = [];
  const checks: Record<string, boolean> = {};
  const say = o.say;
  const check = (name: string, ok: boolean, text: string) => {
    checks[name] = ok;
    say(`    ${ok ? '✔' : '✘'} ${text}`);
  };
  let n = 0;
  const step = (title: string, command?: string): DemoStep => {
    const s: DemoStep = { step: ++n, title, ...(command ? { command } : {}) };
    steps.push(s);
    say(`\n== ${s.step}. ${title}`);
    if (command) say(`   $ ${command}`);
    return s;
  };
  /** The environment of a command as provider `id`: the sim's endpoint and that provider's key. */
  const env = (id: string): NodeJS.ProcessEnv => ({
    OMNI_ENDPOINT: sim.endpoint,
    OMNI_SERVICE_ACCOUNT_KEY: sim.keys[`infra-provider:${id}`],
  });
  const io = (id: string): Io => ({
    // The report comes back as a value; the demo prints it itself.
    stdout: new Writable({ write: (_chunk, _enc, done) => done() }),
    stderr: o.stderr,
    stdinIsTTY: false,
    env: env(id),
    ...(o.signals ? { signals: o.signals } : {}),
  });
  // Each step is a command line, parsed as the CLI parses it; the demo's own logging flags on each.
  const logFlags = ['--log-level', o.logLevel, ...(o.color !== undefined ? [o.color ? '--color' : '--no-color'] : [])];
  const runConfig = (id: string) =>
    o.cli.configOf(
      runCommand,
      ['--id', id, '--yes', '--timeout', '60s', '--step-timeout', '20s', ...logFlags],
      env(id),
    );
  const planConfig = (id: string) => o.cli.configOf(planCommand, ['--id', id, ...logFlags], env(id));
  const showReport = (s: DemoStep, rep: Report) => {
    s.report = rep;
    // Indented by four: wrapped at what is left of the terminal.
    say(indent(renderText(rep, o.width ? { width: o.width - 4 } : {})));
  };
  const run = async (title: string, id: string) => {
    const s = step(
      title,
      `OMNI_ENDPOINT=${sim.endpoint} OMNI_SERVICE_ACCOUNT_KEY=<${id}'s key> stub-provider --id ${id} --yes`,
    );
    const rep = await executeRun(runConfig(id), io(id));
    await controllers.idle();
    showReport(s, rep);
    return rep;
  };
  const view = (id: string) => say(indent(providerView(sim, id).join('\n') || '(nothing left of this provider)'));

  await controllers.idle();
  say(
    `A simulated Omni ${sim.omniVersion} is listening on ${sim.endpoint}, with two infra providers whose processes ` +
      `are gone:`,
  );
  say(
    `  - ${bm} (static, bare metal): machine ${DEMO.stuckMachine} was deleted while the provider was down and is stuck`,
  );
  say(`    tearing down on the provider's six finalizers; machine ${DEMO.runningMachine} is still in use.`);
  say(
    `  - ${kv} (provisioning, built on Omni's provider library): its MachineRequestSet ${DEMO.set} has one ` +
      `provisioned machine.`,
  );
  say('Both are still registered; their last heartbeats are days old, so the stub may stand in for them.');

  // 1. What Omni shows before anything happens.
  step(`What Omni holds for ${bm}`);
  view(bm);

  // 2. The operator scales kubevirt down while it is offline, and someone asks for a new machine.
  step(`The operator scales ${DEMO.set} down to 0 and a new MachineRequest arrives, while ${kv} is offline`);
  controllers.scaleDown(DEMO.set, 0);
  controllers.createMachineRequest({ providerId: kv, id: DEMO.newRequest, talosVersion: 'v1.9.5' });
  await controllers.idle();
  view(kv);
  const scaled = find(sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.scaledDownRequest);
  check(
    'requestStuck',
    scaled?.metadata.phase === 'tearingDown' && scaled.metadata.finalizers.includes(`${kv}.ProvisionController`),
    `MachineRequest ${DEMO.scaledDownRequest} is tearing down, held by ${kv}.ProvisionController: nobody is there to ` +
      `release it`,
  );

  // 3. Rehearse: plan is read-only.
  const before = sim.dump();
  const planStep = step(`Rehearse: what would the stub do for ${bm}? (read-only)`, `stub-provider plan --id ${bm}`);
  showReport(planStep, await executePlan(planConfig(bm), io(bm)));
  check('planWroteNothing', sim.dump() === before, 'plan changed nothing in Omni');

  // 4. The stub for bare-metal: the stuck machine is released, the running one is left alone.
  const runningBefore = JSON.stringify(find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.runningMachine));
  const first = await run(`Run the stub as ${bm}`, bm);
  check(
    'stuckReleased',
    find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.stuckMachine) === undefined &&
      find(sim, NS_INFRA_PROVIDER, T.InfraMachineStatus, DEMO.stuckMachine) === undefined &&
      !sim.store
        .all()
        .some((r) => r.metadata.namespace === providerNamespace(bm) && r.metadata.id === DEMO.stuckMachine),
    `machine ${DEMO.stuckMachine} is released: its InfraMachine, InfraMachineStatus and the provider's five ` +
      `resources are gone`,
  );
  check(
    'runningUntouched',
    JSON.stringify(find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.runningMachine)) === runningBefore &&
      first.running.some((r) => r.id === DEMO.runningMachine),
    `machine ${DEMO.runningMachine} is still running, its finalizers untouched (reported, not counted as a failure)`,
  );
  check(
    'notDeregisteredWhileInUse',
    first.deregistration.status !== 'deregistered' &&
      find(sim, NS_INFRA_PROVIDER, T.InfraProviderStatus, bm) !== undefined,
    `${bm} stays registered while one of its machines is in use`,
  );

  // 5. The operator deletes the machine that was in use; the stub finishes that deletion too, then deregisters.
  step(
    `The operator deletes machine ${DEMO.runningMachine} in Omni (UI, or omnictl delete link ${DEMO.runningMachine})`,
  );
  controllers.deleteMachine(DEMO.runningMachine);
  await controllers.idle();
  view(bm);
  const second = await run(`Run the stub as ${bm} again`, bm);
  check(
    'secondReleased',
    second.released.some((r) => r.id === DEMO.runningMachine) &&
      find(sim, NS_INFRA_PROVIDER, T.InfraMachine, DEMO.runningMachine) === undefined,
    `machine ${DEMO.runningMachine} is released`,
  );
  checkDeregistered(sim, bm, second, check);

  // 6. The stub for kubevirt: the scaled-down request is released, the new one refused.
  const kv1 = await run(`Run the stub as ${kv}`, kv);
  check(
    'requestReleased',
    find(sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.scaledDownRequest) === undefined &&
      find(sim, NS_INFRA_PROVIDER, T.MachineRequestStatus, DEMO.scaledDownRequest) === undefined &&
      !sim.store
        .all()
        .some((r) => r.metadata.namespace === providerNamespace(kv) && r.metadata.id === DEMO.scaledDownRequest),
    `MachineRequest ${DEMO.scaledDownRequest} is released: request, status, state resource and ConfigPatchRequest ` +
      `are gone`,
  );
  const refusal = find(sim, NS_INFRA_PROVIDER, T.MachineRequestStatus, DEMO.newRequest);
  const refusedSpec = refusal ? decodeSpec(MachineRequestStatusSpec, refusal.spec.protoSpec).value : undefined;
  check(
    'newRequestRefused',
    kv1.refused.some((r) => r.id === DEMO.newRequest && r.result === 'refused') &&
      refusedSpec?.stage === MachineRequestStage.FAILED &&
      refusedSpec.error.startsWith('stub-provider'),
    `MachineRequest ${DEMO.newRequest} is refused: its status says FAILED, "${refusedSpec?.error ?? ''}"`,
  );

  // 7. The refused request is deleted; the last run cleans its status and deregisters kubevirt.
  step(`The operator deletes the refused request (omnictl delete machinerequest ${DEMO.newRequest})`);
  const req = find(sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.newRequest);
  if (req) {
    // omnictl delete tears down, then destroys once Omni's own finalizers have let go.
    sim.store.teardown(INTERNAL, req.metadata, req.metadata.owner);
    await controllers.idle();
    const torn = find(sim, NS_INFRA_PROVIDER, T.MachineRequest, DEMO.newRequest);
    if (torn) sim.store.destroy(INTERNAL, torn.metadata, torn.metadata.owner);
  }
  await controllers.idle();
  view(kv);
  const kv2 = await run(`Run the stub as ${kv} again`, kv);
  checkDeregistered(sim, kv, kv2, check);

  const lastSteps = [second, kv2]
    .map((r) => r.deregistration.lastStep)
    .filter((x): x is string => typeof x === 'string');
  const warnings = [
    ...new Set([second, kv2].map((r) => r.deregistration.warning).filter((x): x is string => typeof x === 'string')),
  ];
  step('Last step, for an Omni admin: delete the registrations');
  for (const l of lastSteps) say(`   $ ${l}`);
  for (const w of warnings) say(`   Warning: ${w}`);
  check(
    'registrationsKept',
    [bm, kv].every((id) => find(sim, NS_INFRA_PROVIDER, T.InfraProvider, id) !== undefined),
    'the registrations themselves are left for the admin (the stub never deletes them)',
  );

  const ok = Object.values(checks).every(Boolean);
  say(
    ok
      ? '\nDemo finished: every check passed.'
      : `\nDemo FAILED: ${Object.entries(checks)
          .filter(([, v]) => !v)
          .map(([k]) => k)
          .join(', ')}`,
  );
  return { omniVersion: sim.omniVersion, steps, checks, lastSteps, warnings, ok };
}

function checkDeregistered(
  sim: Sim,
  id: string,
  rep: Report,
  check: (name: string, ok: boolean, text: string) => void,
): void {
  const left = sim.store.all().filter((r) => r.metadata.namespace === providerNamespace(id));
  check(`${id}:namespaceEmpty`, left.length === 0, `namespace ${providerNamespace(id)} is empty`);
  const statuses = [
    find(sim, NS_INFRA_PROVIDER, T.InfraProviderStatus, id),
    find(sim, NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, id),
  ];
  check(
    `${id}:deregistered`,
    rep.deregistration.status === 'deregistered' && statuses.every((s) => s === undefined),
    `${id} is deregistered: its ProviderStatus and ProviderHealthStatus are gone`,
  );
}
