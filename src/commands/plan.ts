// `stub-provider plan`: read-only. What a run would change now, and what blocks what; against Omni,
// or offline from a dump of its state (`--from-dump`). Its exit code predicts run's (docs/design.md 'Exit codes'):
// 0 nothing to do, 10 changes pending, 3 and 4 where run would stop, 2 usage.

import { ExitCode, PreflightError, UsageError } from '../exit-codes.js';
import type { Logger } from 'pino';
import type { State } from '../omni-api/state.js';
import {
  NS_DEFAULT,
  NS_EPHEMERAL,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  providerNamespace,
  T,
} from '../omni-api/resource.js';
import { VERSION } from '../version.js';
import { wipeCliOptions } from '../wipe/index.js';
import { preflight } from '../provider/run/preflight.js';
import type { PreflightResult } from '../provider/run/preflight.js';
import { buildPlan } from '../provider/plan/planner.js';
import type { Plan } from '../provider/plan/plan.js';
import { planReport } from '../provider/report/plan-report.js';
import { takeSnapshot } from '../provider/read/snapshot.js';
import { defineCommand, nonEmpty, once } from './options.js';
import type { Given, OptionTable } from './options.js';
import { checkMachinesMatched, connect, connectionConfig, connectionOptions, loggerFor } from './provider-options.js';
import type { ConnectionConfig, Io } from './provider-options.js';
import { progressFor, showStages } from './progress.js';
import { commandLine, withOutputs } from './run-io.js';
import type { StageTracker } from '../provider/run/stage.js';
import type { Signals } from './process-io.js';
import type { OfflineNote, Result } from './result.js';
import { resolveScenarioFile } from './scenario-file.js';

export const planOptions = {
  ...connectionOptions,
  deregister: {
    type: 'boolean',
    default: true,
    describe: 'Plan the deregistration too (--no-deregister as for run)',
    group: 'Run:',
  },
  wipe: {
    type: 'string',
    choices: wipeCliOptions.wipe.choices,
    default: 'none',
    describe: "Show a wipe step first in each machine's chain (any strategy but none; see run --help)",
    group: 'Run:',
  },
  force: {
    type: 'boolean',
    default: false,
    describe: 'Plan as `run --force` would run: a live provider is reported, not refused (exit 3 without it)',
    group: 'Run:',
  },
  'from-dump': {
    type: 'string',
    describe:
      "Plan offline from a dump of Omni's state (`omnictl get <type> -o yaml` documents, see the operator guide; or " +
      "a `sim --dump` file, or a shipped example's name): no key, no endpoint, nothing asked of Omni",
    group: 'Offline:',
  },
} as const satisfies OptionTable;

/** What `plan` runs with: the command line parsed once (parsePlan), every value checked. */
export interface PlanConfig extends ConnectionConfig {
  deregister: boolean;
  /**
   * `--wipe` other than none: each machine's chain starts with a wipe step (run's RunConfig.wipe holds the strategy).
   */
  wipeStep: boolean;
  force: boolean;
  /** `--from-dump`: the value as given (a file or a shipped example's name) and the file it names. */
  fromDump?: { value: string; file: string };
}

/** `plan`'s command line as yargs parsed it, checked: a UsageError names the first value that cannot be used. */
export function parsePlan(given: Given<typeof planOptions>, env: NodeJS.ProcessEnv): PlanConfig {
  const a = once(planOptions, given);
  const dump = nonEmpty(a['from-dump']);
  const c = connectionConfig(a, env, { offline: dump !== undefined });
  return {
    ...c,
    deregister: a.deregister,
    wipeStep: a.wipe !== 'none',
    force: a.force,
    ...(dump !== undefined ? { fromDump: { value: dump, file: resolveScenarioFile(dump, '--from-dump') } } : {}),
  };
}

export function executePlan(c: PlanConfig, io: Io): Promise<Result> {
  return withOutputs('plan', c.target, io, (_outputs, sig, stages) => makePlan(c, io, sig, stages));
}

async function makePlan(c: PlanConfig, io: Io, sig: Signals, stages: StageTracker): Promise<Result> {
  // On a terminal, what it is doing shows on a progress line on stderr (erased before the result on
  // stdout); elsewhere one log line per phase.
  const progress = progressFor(c, io);
  const log = progress
    ? loggerFor({ ...c, logFormat: 'pretty' }, { ...io, stderr: progress.logStream })
    : loggerFor(c, io);
  const unsubscribe = showStages(stages, progress, log);
  try {
    stages.enter('preflight');
    if (c.fromDump) return await planFromDump(c, c.fromDump, log, sig, stages);
    const client = await connect(c, io, log);
    try {
      const now = () => Date.now() + client.serverClockOffsetMs();
      return await planOn(client.state, c, log, sig, stages, {
        keyProviderId: client.providerId,
        keyName: client.identity.name,
        now,
      });
    } finally {
      await client.close();
    }
  } finally {
    unsubscribe();
    progress?.done();
  }
}

/** The real planning code (preflight, snapshot, plan) over any State: Omni's, or a dump's. */
async function planOn(
  state: State,
  c: PlanConfig,
  log: Logger,
  sig: Signals,
  stages: StageTracker,
  o: { keyProviderId: string; keyName: string; now: () => number },
): Promise<Result> {
  // Read-only, so a live provider does not stop the plan; it stops run, and the exit code says so.
  const pre = await preflight({
    state,
    providerId: c.id,
    keyProviderId: o.keyProviderId,
    keyName: o.keyName,
    force: true,
    now: o.now,
    signal: sig.signal,
  });
  const live = pre.forced && !c.force;
  if (pre.forced && c.force)
    log.warn({ providerId: c.id }, 'a live provider with this ID was detected; planned as `run --force` would run');
  const snap = await takeSnapshot(state, {
    providerId: c.id,
    profile: c.profile,
    stateTypes: c.stateTypes,
    signal: sig.signal,
    stage: stages.enter,
  });
  stages.enter('planning');
  const plan = buildPlan(snap, { providerId: c.id, machines: c.machines, deregister: c.deregister, wipe: c.wipeStep });
  checkMachinesMatched(c, plan.notFound, log, { strict: true });
  stages.enter('done');
  // `forced` is what --force did: without it, nothing was forced.
  const rep = planReport(plan, { version: VERSION, preflight: { ...pre, forced: pre.forced && c.force } });
  if (live) {
    const e = liveProviderRefusal(c.id, pre);
    return { ...rep, exitCode: e.exitCode, error: { code: e.code, message: e.message } };
  }
  return { ...rep, exitCode: changesPending(plan) ? ExitCode.ChangesPending : ExitCode.OK };
}

/** Whether a run now would write anything: a release, a clean-up, a refusal, the announcement, the deregistration. */
export function changesPending(plan: Plan): boolean {
  return (
    plan.items.length > 0 ||
    plan.deregistration.item !== undefined ||
    plan.refusals.some((r) => !r.done) ||
    plan.announce
  );
}

function liveProviderRefusal(id: string, pre: PreflightResult): PreflightError {
  const seen = pre.heartbeat
    ? `sent a heartbeat ${Math.round(pre.heartbeat.ageMs / 1000)} s ago (not written by stub-provider)`
    : 'has a heartbeat that cannot be read';
  return new PreflightError(
    'STUB_LIVE_PROVIDER',
    `run would refuse to start: a live provider with ID ${id} ${seen}. The plan above is what run --force would do; ` +
      `stop the provider first, or pass --force if you are sure it is gone`,
  );
}

/**
 * `--from-dump`: the dump served read-only in this process as the provider's account would see it
 * (src/omni-sim/scenario/dump-state.ts), planned by the same code. Missing what the plan needs is a usage
 * error naming it; what a dump cannot hold is said in the result's `offline` note.
 */
async function planFromDump(
  c: PlanConfig,
  { value, file }: { value: string; file: string },
  log: Logger,
  sig: Signals,
  stages: StageTracker,
): Promise<Result> {
  const [{ loadScenarioFile, ScenarioError }, { dumpState, summarizeDump }] = await Promise.all([
    import('../omni-sim/scenario/scenario.js'),
    import('../omni-sim/scenario/dump-state.js'),
  ]);
  let scenario;
  try {
    scenario = await loadScenarioFile(file, '--from-dump');
  } catch (e) {
    if (e instanceof ScenarioError) throw new UsageError(`--from-dump: ${e.message}`, { cause: e });
    throw e;
  }
  const summary = summarizeDump(scenario);
  if (summary.registered.length === 0) {
    throw new UsageError(
      `--from-dump ${value}: the dump holds no InfraProviders, so it cannot tell whether ${c.id} is registered (run ` +
        `stops with exit 3 when it is not). ` +
        (`Add them: omnictl get infraproviders -o yaml (see "Planning from a dump" in the operator guide for every ` +
          `command)`),
    );
  }
  if (!summary.registered.includes(c.id)) {
    throw new PreflightError(
      'STUB_NOT_REGISTERED',
      `the dump's InfraProviders do not include ${JSON.stringify(c.id)} (it has ` +
        `${summary.registered.map((x) => JSON.stringify(x)).join(', ')}): ` +
        (`in that Omni the provider is not registered, and run would stop with exit 3. Check --id (case-sensitive); ` +
          `if the registration was deleted, see "not registered in the system" in the operator guide`),
    );
  }
  const state = dumpState(scenario, c.id);
  const rep = await planOn(state, c, log, sig, stages, {
    keyProviderId: c.id,
    keyName: `infra-provider:${c.id}`,
    now: () => Date.now(),
  });
  // The profile is read as against Omni; an InfraProviderStatus matters only through its static label,
  // and only for a provider with MachineRequests and no InfraMachines (provider/profile.ts).
  if (c.profile === 'auto' && !summary.has(NS_INFRA_PROVIDER, T.InfraProviderStatus) && !rep.profile.static) {
    throw new UsageError(
      `--from-dump ${value}: the dump holds no InfraProviderStatuses, and ${c.id} has MachineRequests but no ` +
        "InfraMachines: only its status's static label tells whether it is a static (bare-metal) provider too. " +
        'Add them (omnictl get infraproviderstatuses -o yaml), or give --profile bare-metal or --profile provisioning',
    );
  }
  return { ...rep, offline: offlineNote(value, rep, summary) };
}

/** The kinds a plan reads in the shared namespaces, in the order the operator guide dumps them. */
const SHARED_KINDS = [
  [T.InfraProviderStatus, NS_INFRA_PROVIDER],
  [T.InfraMachine, NS_INFRA_PROVIDER],
  [T.InfraMachineStatus, NS_INFRA_PROVIDER],
  [T.BMCConfig, NS_INFRA_PROVIDER],
  [T.MachineRequest, NS_INFRA_PROVIDER],
  [T.MachineRequestStatus, NS_INFRA_PROVIDER],
  [T.ConfigPatchRequest, NS_INFRA_PROVIDER],
  [T.InfraProviderHealthStatus, NS_INFRA_PROVIDER_EPHEMERAL],
  [T.Machine, NS_DEFAULT],
  [T.SysVersion, NS_EPHEMERAL],
] as const;

function offlineNote(
  dump: string,
  rep: Result,
  summary: { has(ns: string, type: string): boolean; hasNamespace(ns: string): boolean },
): OfflineNote {
  const ns = providerNamespace(rep.providerId);
  const notSeen = summary.hasNamespace(ns) ? [] : rep.profile.namespaceTypes;
  // A sim's dump names Omni's version in its header, which stands for its SysVersion (dump-state.ts).
  const known = (type: string) => type === T.SysVersion && rep.omniVersion !== undefined;
  const emptyInDump = SHARED_KINDS.filter(([type, n]) => !summary.has(n, type) && !known(type)).map(([type]) => type);
  const short = (t: string) => t.split('.')[0]!;
  const notes: string[] = [];
  if (notSeen.length > 0) {
    notes.push(
      `Not seen: the provider's own namespace ${ns} (${notSeen.map(short).join(', ')}). Omni has no resource ` +
        `definitions for a provider's types, so omnictl cannot dump them. ` +
        ("A plan against Omni also destroys each machine's resources there before its release, cleans those of " +
          'machines already gone, and removes the rest when it deregisters; the releases, refusals and blockers ' +
          'above stay the same.'),
    );
  }
  if (emptyInDump.length > 0)
    notes.push(
      `Nothing in the dump of: ${emptyInDump.map(short).join(', ')} (none in that Omni, or not dumped: omnictl ` +
        `prints nothing for an empty list).`,
    );
  if (rep.omniVersion === undefined)
    notes.push(
      "Omni's version is unknown (no SysVersion in the dump): the deregistration's warning assumes it may be 1.4 or " +
        'later.',
    );
  notes.push(
    emptyInDump.includes(T.InfraProviderHealthStatus)
      ? 'No heartbeat in the dump (InfraProviderHealthStatuses), so no live provider was seen; run checks against ' +
          'Omni when it starts.'
      : "The live-provider check used the dump's heartbeat, aged to now; run checks it against Omni when it starts.",
  );
  return { dump, notSeen, emptyInDump, notes };
}

export const planCommand = defineCommand({
  command: 'plan',
  describe: 'Read-only: show what run would do now, what blocks what, and the next steps (also offline from a dump)',
  options: planOptions,
  examples: [
    [
      'OMNI_ENDPOINT=https://omni.example.com OMNI_SERVICE_ACCOUNT_KEY=... $0 plan --id bare-metal',
      'What a run would release, refuse and clean up',
    ],
    ['$0 plan --id kubevirt --machine workers-x7k2p9 --output json', 'The plan for one MachineRequest, as JSON'],
    [
      '$0 plan --id bare-metal --from-dump omni-dump.yaml',
      'The same offline, from `omnictl get ... -o yaml` output (no key, no endpoint)',
    ],
    [
      '$0 plan --id bare-metal; [ $? -eq 10 ] && $0 --id bare-metal --yes',
      'In a script: run only when plan says there are changes (exit 10)',
    ],
  ],
  epilogue:
    'Nothing is written to Omni. Exit codes, as run would exit: 0 nothing to do; 10 changes pending; 2 usage (also: ' +
    'no --machine value matched anything, a dump missing what the plan needs); ' +
    ('3 run would be refused (not registered; a live provider, unless --force); 4 authentication; 5 Omni unreachable ' +
      'or its answer malformed; 130/143 interrupted.'),
  parse: parsePlan,
  handler: (given, env, cli) =>
    commandLine('plan', given, env, cli, parsePlan, (c, io, _outputs, sig, stages) => makePlan(c, io, sig, stages)),
});
