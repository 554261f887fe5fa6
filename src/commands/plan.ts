// `stub-provider plan`: read-only. What a run would change now, and what blocks what.

import type { Argv, CommandModule } from 'yargs';
import { VERSION } from '../version.js';
import { preflight } from '../provider/preflight.js';
import { buildPlan } from '../provider/plan.js';
import { planReport } from '../provider/report.js';
import type { Report } from '../provider/report.js';
import { takeSnapshot } from '../provider/snapshot.js';
import { addExamples, checkMachinesMatched, connect, connectionConfig, connectionOptions, loggerFor } from './provider-options.js';
import type { Args, ConnectionConfig, Io } from './provider-options.js';
import { emitReport, exitWith, inputFiles, openOutputs, processIo } from './run-io.js';

const planOptions = {
  ...connectionOptions,
  deregister: { type: 'boolean', default: true, describe: 'Plan the deregistration too (--no-deregister as for run)', group: 'Run:' },
  wipe: { type: 'string', default: 'none', describe: 'Show a wipe step first in each machine\'s chain (any strategy but none; see run --help)', group: 'Run:' },
} as const;

export async function executePlan(a: Args, io: Io): Promise<Report> {
  const c = connectionConfig(a, io.env);
  const outputs = openOutputs({ report: c.reportFile, inputs: inputFiles(c) });
  try {
    const rep = await planWith(c, a, io);
    outputs.writeReport(rep, io);
    return rep;
  } finally {
    outputs.close();
  }
}

async function planWith(c: ConnectionConfig, a: Args, io: Io): Promise<Report> {
  const log = loggerFor(c, io);
  const client = await connect(c, io, log);
  try {
    const now = () => Date.now() + client.serverClockOffsetMs();
    // Read-only: a live provider is reported, not refused.
    const pre = await preflight({ state: client.state, providerId: c.id, keyProviderId: client.providerId, keyName: client.identity.name, force: true, now });
    if (pre.forced) log.warn({ providerId: c.id }, 'a live provider with this ID sent a heartbeat in the last 60 s: run would refuse to start without --force');
    const snap = await takeSnapshot(client.state, { providerId: c.id, profile: c.profile, stateTypes: c.stateTypes });
    const deregister = a.deregister !== false && !/^(1|true|yes)$/i.test(io.env.STUB_PROVIDER_NO_DEREGISTER ?? '');
    const plan = buildPlan(snap, { providerId: c.id, machines: c.machines, deregister, wipe: typeof a.wipe === 'string' && a.wipe !== 'none' });
    checkMachinesMatched(c, plan.notFound, log, { strict: true });
    return planReport(plan, { version: VERSION, preflight: pre });
  } finally {
    await client.close();
  }
}

export const planCommand: CommandModule<object, Args> = {
  command: 'plan',
  describe: 'Read-only: show what run would do now, what blocks what, and the next steps',
  builder: (y: Argv) => addExamples(
    y.options(planOptions).strictOptions(),
    [
      ['OMNI_ENDPOINT=https://omni.example.com OMNI_SERVICE_ACCOUNT_KEY=... $0 plan --id bare-metal', 'What a run would release, refuse and clean up'],
      ['$0 plan --id kubevirt --machine workers-x7k2p9 --output json', 'The plan for one MachineRequest, as JSON'],
    ],
  ).epilogue('Nothing is written to Omni. Exit codes: 0 planned; 2 usage (also: no --machine value matched anything); 3 preflight refused (not registered); 4 authentication.'),
  handler: async (argv) => {
    const io = processIo();
    const rep = await executePlan(argv, io);
    emitReport(rep, connectionConfig(argv, io.env), io);
    exitWith(rep.exitCode);
  },
};
