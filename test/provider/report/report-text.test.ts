// What an operator reads: the text summary and the JSON report of plan and run. They must make
// sense without this project's research notes (docs the operator does not have), and say what
// Omni's version means for the last step.

import { describe, expect, it } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import {
  bareMetalMachine,
  healthStatus,
  omniMachine,
  providerStatus,
  provisionedRequest,
  res,
} from '../../helpers/provider-fixtures.js';
import { takeSnapshot } from '../../../src/provider/read/snapshot.js';
import { buildPlan } from '../../../src/provider/plan/planner.js';
import type { Report } from '../../../src/provider/report/report.js';
import type { Plan } from '../../../src/provider/plan/plan.js';
import { planReport } from '../../../src/provider/report/plan-report.js';
import { runReport } from '../../../src/provider/report/run-report.js';
import { renderText } from '../../../src/provider/report/text.js';
import type { ItemOutcome } from '../../../src/provider/run/outcomes.js';
import type { ReconcileResult } from '../../../src/provider/run/contract.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import { NS_EPHEMERAL, T, providerNamespace, providerType } from '../../../src/omni-api/resource.js';
import { SysVersionSpec } from '../../../src/omni-api/specs/messages.js';
import { encodeSpec } from '../../../src/omni-api/specs/codec.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';

function sysVersion(v: string): Resource {
  return res(NS_EPHEMERAL, T.SysVersion, 'current', {
    spec: encodeSpec(SysVersionSpec, { backend_version: v, instance_name: 'test', backend_api_version: 1 }),
  });
}

async function reportOf(resources: Resource[], o: { machines?: string[]; id?: string } = {}) {
  const id = o.id ?? ID;
  const snap = await takeSnapshot(new FakeState(resources), { providerId: id, profile: 'auto', stateTypes: [] });
  const rep = planReport(
    buildPlan(snap, { providerId: id, machines: o.machines ?? [], deregister: true, wipe: false }),
    { version: 'test' },
  );
  return { rep, text: renderText(rep), json: JSON.stringify(rep) };
}

/** Shapes that exercise every explanation the report can give. */
const SHAPES: [string, Resource[], { machines?: string[]; id?: string }?][] = [
  [
    'deregistration ready (Omni 1.4)',
    [
      sysVersion('v1.4.2'),
      providerStatus(ID, true),
      healthStatus(ID, 0, 'stub-provider: x'),
      res(providerNamespace(ID), providerType('TLSConfig', ID), 'tls-config'),
    ],
  ],
  ['deregistration ready (version unknown)', [providerStatus(ID, true)]],
  [
    'machines being deleted, Omni finalizers, running machines',
    [
      sysVersion('v1.3.4'),
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1, { omniOnStatus: true }),
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
      omniMachine(ID, U2),
    ],
  ],
  [
    'provisioning requests',
    [
      sysVersion('v1.4.2'),
      ...provisionedRequest('kubevirt', 'req-1'),
      ...provisionedRequest('kubevirt', 'req-2', { phase: 'running' }),
    ],
    { id: 'kubevirt' },
  ],
  ['per-machine mode', [sysVersion('v1.4.2'), ...bareMetalMachine(ID, U1)], { machines: [U1, 'no-such-machine'] }],
];

describe('user-facing text cites no internal research docs', () => {
  it.each(SHAPES)('%s', async (_name, resources, o) => {
    const { text, json } = await reportOf(resources, o);
    expect(text).not.toMatch(/\b[\w-]+\.md\b/);
    expect(json).not.toMatch(/\b[\w-]+\.md\b/);
  });
});

describe('deregistration in the plan', () => {
  it('follows the releases of this very run instead of being "not-ready" because of them', async () => {
    const { rep, text } = await reportOf([
      sysVersion('v1.3.4'),
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1),
      ...bareMetalMachine(ID, U2),
    ]);
    expect(rep.deregistration.status).toBe('after-releases');
    expect(text).toMatch(/^Deregistration: .*follows once the releases above are done/m);
    expect(text).not.toMatch(/not-ready|still exist/);
    // Not yet to be run: only after the run that deregisters (docs/design.md, "Output").
    expect(rep.deregistration.lastStep).toBeUndefined();
    expect(rep.deregistration.lastStepAfterRun).toBe(`omnictl infraprovider delete ${ID}`);
    expect(text).not.toContain('Last step, for an admin: omnictl');
    expect(text).toContain(
      `Last step, for an admin, once a run has deregistered the provider (not before): omnictl infraprovider delete ` +
        `${ID}`,
    );
  });

  it('the same for MachineRequests of a provisioning provider', async () => {
    const { rep } = await reportOf(
      [sysVersion('v1.4.2'), ...provisionedRequest('kubevirt', 'req-1', { withCpr: false })],
      { id: 'kubevirt' },
    );
    // Omni's ClusterMachineRequestStatusController stays on this request after our release, but lets
    // go as soon as it is alone on it: Omni then destroys the request.
    expect(rep.deregistration.status).toBe('after-releases');
    const held = provisionedRequest('kubevirt', 'req-3', { withCpr: false });
    held[0]!.metadata.finalizers.push('other.ProvisionController');
    const { rep: rep3 } = await reportOf([sysVersion('v1.4.2'), ...held], { id: 'kubevirt' });
    // Another provider's finalizer stays on it: nothing lets it go, so deregistration cannot follow.
    expect(rep3.deregistration.status).toBe('not-ready');
    const mine = provisionedRequest('kubevirt', 'req-2', { withCpr: false });
    mine[0]!.metadata.finalizers = ['kubevirt.ProvisionController'];
    const { rep: rep2, text } = await reportOf([sysVersion('v1.4.2'), ...mine], { id: 'kubevirt' });
    expect(rep2.deregistration.status).toBe('after-releases');
    expect(text).toMatch(/1 MachineRequest\(s\) of kubevirt/);
  });

  it('stays "not-ready", with the reason, when a running machine or a Machine with the ID blocks it', async () => {
    const running = await reportOf([
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1),
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
    ]);
    expect(running.rep.deregistration).toMatchObject({
      status: 'not-ready',
      reasons: [`1 InfraMachine(s) of ${ID} still exist`],
    });
    expect(running.text).toMatch(/^Deregistration: not-ready — 1 InfraMachine\(s\) of bare-metal still exist/m);
    const machine = await reportOf([
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U1),
      omniMachine(ID, '33333333-3333-3333-3333-333333333333'),
    ]);
    expect(machine.rep.deregistration.status).toBe('not-ready');
    expect(machine.text).toMatch(/^Deregistration: not-ready — Machine 33333333/m);
  });
});

describe('untrusted text in the summary (design rule 13)', () => {
  const FORGED = '\x1b[2J\x1b[H\r\nDeregistration: deregistered\nstub-provider: done, nothing to do [OK]\u202e';
  it("IDs, finalizers and Omni's messages are escaped: no control character, no forged line", async () => {
    const rid = `req-1${FORGED}`;
    const { rep } = await reportOf([sysVersion('v1.4.2'), ...provisionedRequest('kubevirt', rid)], { id: 'kubevirt' });
    rep.failed.push({
      kind: 'InfraMachine',
      id: `m${FORGED}`,
      reason: `Omni answered: ${FORGED}`,
      nextStep: `run again${FORGED}`,
    });
    rep.deregistration.reasons.push(`blocked by ${FORGED}`);
    const text = renderText(rep);
    expect(text).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/); // eslint-disable-line no-control-regex
    const lines = text.split('\n');
    expect(lines.filter((l) => /^\s*(Deregistration: deregistered|stub-provider: done)/.test(l))).toEqual([]);
    expect(text).toContain(
      'req-1\\x1b[2J\\x1b[H\\r\\nDeregistration: deregistered\\nstub-provider: done, nothing to do [OK]\\u202e',
    );
    // The report object itself is left as it was: JSON output keeps the real values.
    expect(rep.failed.at(-1)?.id).toBe(`m${FORGED}`);
  });
});

/** The plan of these resources, and the report of a run that ended with it as its last plan. */
async function planOf(resources: Resource[], o: { machines?: string[]; deregister?: boolean } = {}): Promise<Plan> {
  const snap = await takeSnapshot(new FakeState(resources), { providerId: ID, profile: 'auto', stateTypes: [] });
  return buildPlan(snap, { providerId: ID, machines: o.machines ?? [], deregister: o.deregister ?? true, wipe: false });
}

function runOf(plan: Plan, r: Partial<ReconcileResult> = {}): { rep: Report; text: string } {
  const result: ReconcileResult = {
    runId: 'run-1',
    firstPlan: plan,
    lastPlan: plan,
    outcomes: [],
    refusals: [],
    announced: false,
    heartbeats: 0,
    deregistered: false,
    declined: false,
    remaining: [],
    timedOut: false,
    interrupted: false,
    passes: 1,
    settle: { ms: 5000, items: 0, gone: 0, held: 0 },
    ...r,
  };
  const rep = runReport(result, {
    version: 'test',
    writes: {},
    ...(r.interrupted ? { interruptCode: 130 as const } : {}),
  });
  return { rep, text: renderText(rep) };
}

const LAST = `omnictl infraprovider delete ${ID}`;
const ready = () => planOf([sysVersion('v1.3.4'), providerStatus(ID, true), healthStatus(ID, 0, 'stub-provider: x')]);
const withMachines = () =>
  planOf([sysVersion('v1.3.4'), providerStatus(ID, true), ...bareMetalMachine(ID, U1), ...bareMetalMachine(ID, U2)]);
const nothingLeft = () => planOf([sysVersion('v1.3.4')]);

describe('the time a command took', () => {
  it('the text summary says how long it took when the report knows (the CLI sets it), else nothing', async () => {
    const { rep, text } = runOf(await ready());
    expect(text).not.toMatch(/^Took /m);
    expect(renderText({ ...rep, durationMs: 41_300 })).toMatch(/^Took 41\.3 s\.$/m);
    expect(renderText({ ...rep, durationMs: 754_000 })).toMatch(/^Took 12\.6 min\.$/m);
  });
});

describe('the last step only once the provider was deregistered', () => {
  it('a declined run: no last step; nothing was changed, run again and answer y, keep the registration', async () => {
    for (const plan of [await ready(), await withMachines()]) {
      const { rep, text } = runOf(plan, { declined: true, passes: 0 });
      expect(rep.result).toBe('declined');
      // Nothing was written; what the plan showed is still pending, as plan's 10 says.
      expect(rep.exitCode).toBe(10);
      expect(rep.deregistration.lastStep).toBeUndefined();
      expect(rep.deregistration.lastStepAfterRun).toBeUndefined();
      expect(text).not.toContain('Last step');
      expect(text).toContain('Next: nothing was changed; run again and answer y, or see `stub-provider plan`.');
      expect(text).toContain(
        `Keep the registration until a run reports "Deregistration: deregistered": \`${LAST}\` deletes`,
      );
      // The command is named only as what not to run yet.
      expect(text.split('\n').filter((l) => l.includes(LAST))).toHaveLength(1);
    }
  });

  it('an incomplete run (a failed item, a timeout): no last step; run again, the reasons above', async () => {
    const plan = await withMachines();
    const failed = runOf(plan, {
      outcomes: [
        { kind: 'InfraMachine', id: U1, status: 'failed', reason: 'Omni said no', nextStep: 'run again', counts: true },
      ],
    });
    const timedOut = runOf(plan, {
      timedOut: true,
      remaining: [{ kind: 'InfraMachine', id: U1, reason: 'not released before --timeout', nextStep: 'run again' }],
    });
    for (const { rep, text } of [failed, timedOut]) {
      expect(rep.result).toBe('incomplete');
      expect(rep.deregistration.lastStep).toBeUndefined();
      expect(text).not.toContain('Last step');
      expect(text).toContain(
        'Next: not everything was released (the reasons are above); run again: it carries on where this run stopped.',
      );
      expect(text).toContain('Keep the registration until a run reports "Deregistration: deregistered"');
    }
    expect(failed.text).toMatch(/^Failed \(1\):\n {2}- InfraMachine 1{8}-.*: Omni said no$/m);
    expect(timedOut.text).toContain('Timed out before everything was released (--timeout).');
    expect(timedOut.text).toMatch(
      /^Not done before --timeout \(1\):\n {2}- InfraMachine 1{8}-.*: not released before/m,
    );
    // A timeout that left nothing (everything released and deregistered in its grace) is not incomplete.
    expect(runOf(plan, { timedOut: true }).rep.result).not.toBe('incomplete');
  });

  it('an incomplete run that deregistered gives no last step: the next run, finding nothing left, does', async () => {
    const { rep, text } = runOf(await ready(), {
      deregistered: true,
      outcomes: [
        { kind: 'InfraMachine', id: U1, status: 'failed', reason: 'Omni said no', nextStep: 'run again', counts: true },
      ],
    });
    expect(rep.result).toBe('incomplete');
    expect(rep.deregistration.status).toBe('deregistered');
    expect(rep.deregistration.lastStep).toBeUndefined();
    expect(text).not.toContain('Last step');
    const again = runOf(await nothingLeft());
    expect(again.rep.result).toBe('nothing-to-do');
    expect(again.rep.deregistration).toMatchObject({ status: 'done', lastStep: LAST });
    expect(again.text).toContain(`Last step, for an admin: ${LAST}`);
    expect(again.text).not.toMatch(/Next:|Keep the registration/);
  });

  it('an interrupted run: no last step', async () => {
    const { rep, text } = runOf(await ready(), { interrupted: true });
    expect(rep.result).toBe('interrupted');
    expect(rep.deregistration.lastStep).toBeUndefined();
    expect(text).not.toContain('Last step');
    expect(text).toContain('Interrupted: calls in flight were cancelled; run again to finish.');
  });

  it("a run that deregistered: the last step (with Omni's warning where it has one), nothing else to do", async () => {
    const { rep, text } = runOf(await ready(), { deregistered: true, announced: true });
    expect(rep.result).toBe('done');
    expect(rep.deregistration).toMatchObject({ status: 'deregistered', lastStep: LAST });
    expect(text).toMatch(new RegExp(`^Deregistration: deregistered\nLast step, for an admin: ${LAST}$`, 'm'));
    expect(text).not.toMatch(/Next:|Keep the registration/);
    const v14 = await planOf([sysVersion('v1.4.2'), providerStatus(ID, true)]);
    expect(runOf(v14, { deregistered: true }).text).toMatch(
      /^Last step, for an admin: .*\nWarning: On Omni 1\.4 and later, deleting the provider/m,
    );
  });

  it('finished, machines in use or released but not yet destroyed by Omni: no last step, what to do', async () => {
    const running = await planOf([
      sysVersion('v1.3.4'),
      providerStatus(ID, true),
      ...bareMetalMachine(ID, U2, { phase: 'running' }),
    ]);
    const r1 = runOf(running);
    expect(r1.rep.result).toBe('nothing-to-do');
    expect(r1.rep.deregistration.lastStep).toBeUndefined();
    expect(r1.text).toMatch(/^Deregistration: not-ready — 1 InfraMachine\(s\) of bare-metal still exist$/m);
    expect(r1.text).toContain('Keep the registration until a run reports "Deregistration: deregistered"');
    const released = runOf(await withMachines(), {
      outcomes: [{ kind: 'InfraMachine', id: U1, status: 'released', counts: true }],
    });
    expect(released.rep.deregistration.status).toBe('after-releases');
    expect(released.text).not.toContain('Last step');
    expect(released.text).toContain(
      'Next: run again to deregister (Omni had not yet destroyed what this run released).',
    );
  });

  it('per-machine mode and --no-deregister never give the last step, nor tell to keep the registration', async () => {
    const perMachine = runOf(await planOf([sysVersion('v1.3.4'), ...bareMetalMachine(ID, U1)], { machines: [U1] }), {
      outcomes: [{ kind: 'InfraMachine', id: U1, status: 'released', counts: true }],
    });
    const kept = runOf(await planOf([sysVersion('v1.3.4'), providerStatus(ID, true)], { deregister: false }));
    for (const { rep, text } of [perMachine, kept]) {
      expect(rep.deregistration.lastStep).toBeUndefined();
      expect(text).not.toMatch(/Last step|Keep the registration|omnictl infraprovider delete/);
    }
  });

  it('plan: the last step when an earlier run deregistered, "once a run has deregistered" if a run would', async () => {
    const done = planReport(await nothingLeft(), { version: 'test' });
    expect(done.deregistration).toMatchObject({ status: 'done', lastStep: LAST });
    expect(renderText(done)).toContain(`Last step, for an admin: ${LAST}`);
    const wouldDeregister = planReport(await ready(), { version: 'test' });
    expect(wouldDeregister.deregistration).toMatchObject({ status: 'ready', lastStepAfterRun: LAST });
    expect(wouldDeregister.deregistration.lastStep).toBeUndefined();
    expect(renderText(wouldDeregister)).toContain(
      `Last step, for an admin, once a run has deregistered the provider (not before): ${LAST}`,
    );
    const notReady = planReport(
      await planOf([sysVersion('v1.3.4'), providerStatus(ID, true), ...bareMetalMachine(ID, U2, { phase: 'running' })]),
      { version: 'test' },
    );
    expect(renderText(notReady)).not.toContain('Last step');
  });
});

describe('step chains in the plan text', () => {
  it("at 120 columns a bare-metal machine's chain is wrapped below it, in order; its ID not repeated", async () => {
    const rep = planReport(await withMachines(), { version: 'test' });
    const text = renderText(rep, { width: 120 });
    const section = text.slice(text.indexOf('Would release or clean'), text.indexOf('\nDeregistration:'));
    expect(
      section.split('\n').every((l) => l.length <= 120),
      section,
    ).toBe(true);
    const block = /^ {2}- InfraMachine 1{8}-1{4}-1{4}-1{4}-1{12}: (.*):\n((?: {6}.*\n)+)/m.exec(text);
    expect(block, text).not.toBeNull();
    const steps = block![2]!
      .split('\n')
      .filter(Boolean)
      .map((l) => l.trim())
      .join(' ')
      .split(/ ?→ /);
    const planned = rep.planned!.items.find((i) => i.id === U1)!.steps;
    expect(steps).toHaveLength(planned.length);
    expect(steps.at(-1)).toBe('remove-finalizers InfraMachines');
    expect(steps.map((s) => s.split(' ')[0])).toEqual(planned.map((s) => s.op));
    expect(block![2]).not.toContain(U1);
  });

  it("off a terminal nothing is wrapped: each machine's chain on its item's line", async () => {
    const rep = planReport(await withMachines(), { version: 'test' });
    const text = renderText(rep);
    for (const id of [U1, U2]) {
      const line = text.split('\n').find((l) => l.startsWith(`  - InfraMachine ${id}: `))!;
      expect(line).toMatch(/→ remove-finalizers InfraMachines$/);
      expect(line.length).toBeGreaterThan(200);
    }
    expect(text).not.toMatch(/^ {6}\S/m);
  });

  it.each([60, 80, 100])(
    'on a terminal of %i columns every row fits, rows break only between words, and they join into the text',
    async (width) => {
      const rep = planReport(await withMachines(), { version: 'test' });
      const flat = renderText(rep);
      const wrapped = renderText(rep, { width });
      const rows = wrapped.split('\n');
      // A row is wider only when it is one word (a resource path longer than the terminal).
      expect(rows.filter((r) => r.length > width && r.trim().includes(' '))).toEqual([]);
      const words = (t: string) => t.split(/\s+/).filter(Boolean);
      expect(words(wrapped)).toEqual(words(flat));
      // No word was cut: every word of the wrapped text is a word of the flat one.
      expect(rows.length).toBeGreaterThan(flat.split('\n').length);
    },
  );

  it("a short chain stays on its item's line; a step on another ID names it", async () => {
    const rep = planReport(await ready(), { version: 'test' });
    rep.planned!.items = [
      {
        kind: 'MachineRequest',
        id: 'req-1',
        reason: 'being deleted',
        steps: [
          { op: 'destroy', resource: 'infra-provider/ConfigPatchRequests.omni.sidero.dev/cpr-9', why: '' },
          {
            op: 'remove-finalizers',
            resource: 'infra-provider/MachineRequests.omni.sidero.dev/req-1',
            finalizers: ['bare-metal.ProvisionController'],
            why: '',
          },
        ],
      },
    ];
    expect(renderText(rep)).toMatch(
      new RegExp(
        String.raw`^ {2}- MachineRequest req-1: being deleted: destroy ConfigPatchRequests\/cpr-9 → ` +
          String.raw`remove-finalizers MachineRequests$`,
        'm',
      ),
    );
  });
});

describe("what Omni's own finalizers will do, in the plan", () => {
  it('a request scaled down before its machine joined: "Omni lets go by itself", no "Will wait for Omni"', async () => {
    const { rep, text } = await reportOf(
      [sysVersion('v1.9.3'), providerStatus('kubevirt', false), ...provisionedRequest('kubevirt', 'req-1')],
      { id: 'kubevirt' },
    );
    expect(rep.waits).toEqual([]);
    expect(rep.lettingGo.map((e) => e.kind)).toEqual([
      'ConfigPatchRequests',
      'MachineRequestStatuses',
      'MachineRequests',
    ]);
    expect(text).toMatch(/^Omni lets go by itself \(3\):$/m);
    expect(text).not.toMatch(/Will wait for Omni|holds it until the MachineSetNode/);
  });

  it('a request whose machine is still in Omni: said plainly that it cannot be seen, and what decides it', async () => {
    const { rep, text } = await reportOf(
      [
        sysVersion('v1.9.3'),
        providerStatus('kubevirt', false),
        ...provisionedRequest('kubevirt', 'req-1', { machineUuid: U1 }),
        omniMachine('kubevirt', U1),
      ],
      { id: 'kubevirt' },
    );
    expect(rep.unseen).toEqual([expect.objectContaining({ kind: 'MachineRequestStatuses', id: 'req-1' })]);
    expect(text).toMatch(/^Cannot be seen with the provider's account \(Omni decides\) \(1\):$/m);
    expect(text).toContain(`waits while machine ${U1} is in a cluster`);
    expect(text).not.toMatch(/Will wait for Omni/);
  });
});

describe('the run report: the settle after the last write, and the header', () => {
  const KV = 'kubevirt';
  async function planOf(resources: Resource[]) {
    const snap = await takeSnapshot(new FakeState(resources), { providerId: KV, profile: 'auto', stateTypes: [] });
    return buildPlan(snap, { providerId: KV, machines: [], deregister: true, wipe: false });
  }
  const result = (over: Partial<ReconcileResult>, first: Plan, last: Plan): ReconcileResult => ({
    runId: 'run-1',
    firstPlan: first,
    lastPlan: last,
    outcomes: [],
    refusals: [],
    announced: true,
    heartbeats: 1,
    deregistered: false,
    declined: false,
    timedOut: false,
    remaining: [],
    interrupted: false,
    passes: 2,
    settle: { ms: 5000, items: 0, gone: 0, held: 0 },
    ...over,
  });

  it("the header shows the first pass's profile, not a later one's that no longer sees what it released", async () => {
    const first = await planOf([providerStatus(KV, false), ...provisionedRequest(KV, 'r1')]);
    const last = await planOf([providerStatus(KV, false)]);
    expect(first.profile.reason).not.toBe(last.profile.reason);
    const rep = runReport(result({}, first, last), { version: 'test', writes: {} });
    expect(rep.profile.reason).toBe(first.profile.reason);
    expect(renderText(rep)).toContain(`; profile ${first.profile.reason}`);
  });

  it('released and still held: Blocked says which came last; gone within the settle time: only Released', async () => {
    const plan = await planOf([providerStatus(KV, false)]);
    const held: ItemOutcome = {
      kind: 'MachineRequest',
      id: 'r1',
      status: 'released',
      counts: true,
      heldBy: ['ClusterMachineRequestStatusController'],
      reason:
        "ClusterMachineRequestStatusController: Omni's ClusterMachineRequestStatusController holds it until X is " +
        'gone, then lets go',
      nextStep: 'do something',
      settle: { ms: 5000, outcome: 'held' },
    };
    const gone: ItemOutcome = {
      kind: 'MachineRequest',
      id: 'r2',
      status: 'released',
      counts: true,
      settle: { ms: 5000, outcome: 'gone' },
    };
    const rep = runReport(
      result({ outcomes: [held, gone], settle: { ms: 5000, items: 2, gone: 1, held: 1 } }, plan, plan),
      { version: 'test', writes: {} },
    );
    expect(rep.released.map((x) => x.id)).toEqual(['r1', 'r2']);
    expect(rep.blocked).toEqual([
      {
        kind: 'MachineRequest',
        id: 'r1',
        reason: `released by stub-provider; still held after 5 s by ${held.reason}`,
        nextStep: 'do something',
        counts: false,
      },
    ]);
    expect(rep.settle).toEqual({ ms: 5000, items: 2, gone: 1, held: 1 });
    const text = renderText(rep);
    expect(text).toContain(
      'Watched for up to 5 s after the last write (--settle) the 2 item(s) others still held: 1 gone, 1 still held.',
    );
    expect(text).toMatch(
      new RegExp(
        String.raw`^ {2}- MachineRequest r1: released by stub-provider; still held after 5 s by ` +
          String.raw`ClusterMachineRequestStatusController`,
        'm',
      ),
    );
    expect(text).not.toMatch(/MachineRequest r2:/);
  });

  it('--settle 0: not watched, and both the entry and the summary say so', async () => {
    const plan = await planOf([providerStatus(KV, false)]);
    const held: ItemOutcome = {
      kind: 'MachineRequest',
      id: 'r1',
      status: 'released',
      counts: true,
      heldBy: ['ClusterMachineRequestStatusController'],
      reason: 'ClusterMachineRequestStatusController: lets go',
      nextStep: 'nothing to do',
      settle: { ms: 0, outcome: 'not-watched' },
    };
    const rep = runReport(result({ outcomes: [held], settle: { ms: 0, items: 1, gone: 0, held: 0 } }, plan, plan), {
      version: 'test',
      writes: {},
    });
    expect(rep.blocked[0]!.reason).toBe(
      'released by stub-provider; still held when last read by ClusterMachineRequestStatusController: lets go ' +
        '(--settle 0: not watched after the last write)',
    );
    expect(renderText(rep)).toContain(
      'Not watched after the last write (--settle 0): 1 item(s) others still held are reported as last read.',
    );
  });

  it('a deletion left to Omni and still held after the settle time is Blocked as such, not as released', async () => {
    const plan = await planOf([providerStatus(KV, false)]);
    const left: ItemOutcome = {
      kind: 'MachineRequest',
      id: 'r1',
      status: 'blocked',
      counts: false,
      heldBy: ['ClusterMachineRequestStatusController'],
      reason: 'ClusterMachineRequestStatusController: x',
      nextStep: 'y',
      settle: { ms: 2000, outcome: 'held' },
    };
    const rep = runReport(result({ outcomes: [left] }, plan, plan), { version: 'test', writes: {} });
    expect(rep.blocked).toEqual([
      {
        kind: 'MachineRequest',
        id: 'r1',
        reason:
          'being deleted, nothing of ours left on it; still held after 2 s by ClusterMachineRequestStatusController: x',
        nextStep: 'y',
        counts: false,
      },
    ]);
    expect(rep.released).toEqual([]);
  });
});
