// `stub-provider plan`: read-only. What a run would change now, and what blocks what. Its exit code
// predicts run's (issue 14 item 6):
// 0 nothing to do, 10 changes pending, 3 and 4 where run would stop, 2 usage.

import type { Argv, CommandModule } from 'yargs';
import { ExitCode, PreflightError } from '../exit-codes.js';
import type { Logger } from '../log.js';
import type { State } from '../omni-client/types.js';
import { VERSION } from '../version.js';
import { preflight } from '../provider/preflight.js';
import type { PreflightResult } from '../provider/preflight.js';
import { buildPlan } from '../provider/plan.js';
import type { Plan } from '../provider/plan.js';
import { planReport } from '../provider/report.js';
import { takeSnapshot } from '../provider/snapshot.js';
import { addExamples, checkMachinesMatched, connect, connectionConfig, connectionOptions, loggerFor } from './provider-options.js';
import type { Args, ConnectionConfig, Io } from './provider-options.js';
import { handleResult, processIo, withOutputs } from './run-io.js';
import type { Result, Signals } from './run-io.js';

export const planOptions = {
  ...connectionOptions,
  deregister: { type: 'boolean', default: true, describe: 'Plan the deregistration too (--no-deregister as for run)', group: 'Run:' },
  wipe: { type: 'string', default: 'none', describe: 'Show a wipe step first in each machine\'s chain (any strategy but none; see run --help)', group: 'Run:' },
  force: { type: 'boolean', default: false, describe: 'Plan as `run --force` would run: a live provider is reported, not refused (exit 3 without it)', group: 'Run:' },
} as const;

export async function executePlan(a: Args, io: Io): Promise<Result> {
  return withOutputs('plan', a, io, {}, async (_outputs, sig) => {
    const c = connectionConfig(a, io.env);
    const log = loggerFor(c, io);
    const client = await connect(c, io, log);
    try {
      const now = () => Date.now() + client.serverClockOffsetMs();
      return await planOn(client.state, c, a, log, sig, { keyProviderId: client.providerId, keyName: client.identity.name, now });
    } finally {
      await client.close();
    }
  });
}

/** The real planning code (preflight, snapshot, plan) over a State. */
async function planOn(state: State, c: ConnectionConfig, a: Args, log: Logger, sig: Signals, o: { keyProviderId: string; keyName: string; now: () => number }): Promise<Result> {
  const force = a.force === true;
  // Read-only, so a live provider does not stop the plan; it stops run, and the exit code says so.
  const pre = await preflight({ state, providerId: c.id, keyProviderId: o.keyProviderId, keyName: o.keyName, force: true, now: o.now, signal: sig.signal });
  const live = pre.forced && !force;
  if (pre.forced && force) log.warn({ providerId: c.id }, 'a live provider with this ID was detected; planned as `run --force` would run');
  const snap = await takeSnapshot(state, { providerId: c.id, profile: c.profile, stateTypes: c.stateTypes, signal: sig.signal });
  const deregister = a.deregister !== false;
  const plan = buildPlan(snap, { providerId: c.id, machines: c.machines, deregister, wipe: typeof a.wipe === 'string' && a.wipe !== 'none' });
  checkMachinesMatched(c, plan.notFound, log, { strict: true });
  // `forced` is what --force did: without it, nothing was forced.
  const rep = planReport(plan, { version: VERSION, preflight: { ...pre, forced: pre.forced && force } });
  if (live) {
    const e = liveProviderRefusal(c.id, pre);
    return { ...rep, exitCode: e.exitCode, error: { code: e.code, message: e.message } };
  }
  return { ...rep, exitCode: changesPending(plan) ? ExitCode.ChangesPending : ExitCode.OK };
}

/** Whether a run now would write anything: a release, a clean-up, a refusal, the announcement, the deregistration. */
export function changesPending(plan: Plan): boolean {
  return plan.items.length > 0 || plan.deregistration.item !== undefined || plan.refusals.some((r) => !r.done) || plan.announce;
}

function liveProviderRefusal(id: string, pre: PreflightResult): PreflightError {
  const seen = pre.heartbeat ? `sent a heartbeat ${Math.round(pre.heartbeat.ageMs / 1000)} s ago (not written by stub-provider)` : 'has a heartbeat that cannot be read';
  return new PreflightError('STUB_LIVE_PROVIDER',
    `run would refuse to start: a live provider with ID ${id} ${seen}. The plan above is what run --force would do; stop the provider first, or pass --force if you are sure it is gone`);
}

export const planCommand: CommandModule<object, Args> = {
  command: 'plan',
  describe: 'Read-only: show what run would do now, what blocks what, and the next steps',
  builder: (y: Argv) => addExamples(
    y.options(planOptions).strictOptions(),
    [
      ['OMNI_ENDPOINT=https://omni.example.com OMNI_SERVICE_ACCOUNT_KEY=... $0 plan --id bare-metal', 'What a run would release, refuse and clean up'],
      ['$0 plan --id kubevirt --machine workers-x7k2p9 --output json', 'The plan for one MachineRequest, as JSON'],
      ['$0 plan --id bare-metal; [ $? -eq 10 ] && $0 --id bare-metal --yes', 'In a script: run only when plan says there are changes (exit 10)'],
    ],
  ).epilogue('Nothing is written to Omni. Exit codes, as run would exit: 0 nothing to do; 10 changes pending; 2 usage (also: no --machine value matched anything); ' +
    '3 run would be refused (not registered; a live provider, unless --force); 4 authentication; 5 Omni unreachable or its answer malformed; 130/143 interrupted.'),
  handler: async (argv) => {
    const io = processIo();
    await handleResult('plan', argv, io, () => executePlan(argv, io));
  },
};
