// Deadlines are deadlines (deadline.ts; docs/design.md "Deadlines"): with --wait --timeout no write starts after the
// deadline, and the run then reports what is true: never "incomplete" with nothing failed, blocked, still in use or
// left; everything released by then is deregistered within the grace, exit 0; --settle is capped by the same end.

import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { T } from '../../../src/omni-api/resource.js';
import type { WriteIntent } from '../../../src/omni-client/write/observer.js';
import type { Sim } from '../../../src/omni-sim/index.js';
import { generateScenario, provisionedRequest } from '../../../src/omni-sim/scenario/generate.js';
import { runReport } from '../../../src/provider/report/run-report.js';
import { DEREGISTER_GRACE_MS } from '../../../src/provider/run/deadline.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../../src/provider/run/contract.js';
import { providerSim } from '../../helpers/cli-config.js';
import { providerStatus, reconcileOptions } from '../../helpers/provider-fixtures.js';
import { simEachTest } from '../../helpers/sim-client.js';

const ID = 'kubevirt';
const omni = simEachTest();

interface Sent {
  intent: WriteIntent;
  at: number;
}

/** The run's monotonic clock: Date.now plus `skew`; `start`, its first reading (the deadline's start). */
interface Clock {
  skew: number;
  start?: number;
}

/**
 * A --wait run of `o` against `s`, on a monotonic clock that is Date.now plus `skew()` (a test may move it), its
 * deadline's start recorded: the writes it started, when, and the report.
 */
async function waitRun(
  s: Sim,
  o: Partial<ReconcileOptions>,
  onOk?: (i: WriteIntent) => void,
  clock: Clock = { skew: 0 },
) {
  const sent: Sent[] = [];
  const client = await omni.client(s, ID, {
    concurrency: 8,
    onWrite: (intent) => {
      sent.push({ intent, at: Date.now() });
      return (out) => {
        if (out.result === 'ok') onOk?.(intent);
      };
    },
  });
  const monotonic = () => {
    const t = Date.now() + clock.skew;
    clock.start ??= t;
    return t;
  };
  const r = await reconcile(
    { state: client.state, logger: silentLogger(), version: 'test', monotonic },
    reconcileOptions(ID, { wait: true, concurrency: 8, ...o }),
  );
  const report = runReport(r, { version: 'test', writes: {} });
  return { r, report, sent, clock };
}

describe('--wait --timeout under a write budget', () => {
  it('no write starts after the deadline; the run reports what is left, never incomplete with none', async () => {
    // 40 requests behind 6 KB/s: ~25 s of bytes, cut at 3 s.
    const sim = await omni.sim(
      generateScenario({
        providerId: ID,
        machines: 0,
        requests: 40,
        omniVersion: '1.9.3',
        faults: { throttle: { infraProvider: { bytesPerSecond: 6_000, burst: 1_200 }, maxWaitMs: 200 } },
      }),
    );
    await sim.controllers?.idle();
    const timeoutMs = 3_000;
    const { r, report, sent, clock } = await waitRun(sim, { timeoutMs, settleMs: 0 });
    const deadline = clock.start! + timeoutMs;
    const late = sent.filter((w) => w.at > deadline);
    expect(
      late.map((w) => `${w.intent.method} ${w.intent.resource.id} +${w.at - deadline} ms`),
      'writes started after the deadline',
    ).toEqual([]);
    expect(r.timedOut).toBe(true);
    expect(report.result).toBe('incomplete');
    const counted = report.failed.length + report.blocked.filter((b) => b.counts).length;
    expect(report.remaining.length + counted + report.running.length).toBeGreaterThan(0);
    // Every request is accounted for: released, or left (and still held in Omni).
    const held = sim.store
      .all()
      .filter((x) => x.metadata.type === T.MachineRequest && x.metadata.finalizers.length > 0)
      .map((x) => x.metadata.id);
    const reported = new Set([...report.remaining, ...report.blocked, ...report.failed].map((x) => x.id));
    expect(held.filter((id) => !reported.has(id))).toEqual([]);
    expect(report.released.length + held.length).toBe(40);
  }, 60_000);
});

describe('--timeout passes as the last request is released', () => {
  it('the deregistration follows within the grace, exit 0; no other write after the deadline', async () => {
    const sim = await omni.sim(generateScenario({ providerId: ID, machines: 0, requests: 3, omniVersion: '1.9.3' }));
    await sim.controllers?.idle();
    let released = 0;
    let deadlineAt: number | undefined;
    const timeoutMs = 60_000;
    const clock: Clock = { skew: 0 };
    const { report, sent } = await waitRun(
      sim,
      { timeoutMs, settleMs: 0 },
      (intent) => {
        // The deadline passes the moment the last request is released (the monotonic clock jumps to it).
        if (intent.method !== 'Update' || intent.resource.type !== T.MachineRequest || ++released !== 3) return;
        deadlineAt = Date.now();
        clock.skew = clock.start! + timeoutMs - deadlineAt;
      },
      clock,
    );
    expect(released).toBe(3);
    expect(report).toMatchObject({ result: 'done', exitCode: 0, timedOut: false, remaining: [] });
    expect(report.deregistration.status).toBe('deregistered');
    const after = sent.filter((w) => w.at > deadlineAt!);
    expect(after.length).toBeGreaterThan(0);
    // Only the deregistration's writes, and within the grace.
    expect(after.filter((w) => w.intent.method !== 'Destroy').map((w) => w.intent.resource.type)).toEqual([]);
    expect(Math.max(...after.map((w) => w.at - deadlineAt!))).toBeLessThan(DEREGISTER_GRACE_MS);
  }, 60_000);
});

describe('--settle is capped by --timeout', () => {
  it('a released request still held by another controller is watched at most until the deadline', async () => {
    const rs = provisionedRequest(ID, 'w-1');
    rs[0]!.metadata.finalizers.push('SomeFutureController');
    const sim = omni.closing(await providerSim('1.9.3', [providerStatus(ID, false), ...rs], { ids: [ID] }));
    const { report } = await waitRun(sim, { timeoutMs: 1_000, settleMs: 60_000 });
    expect(report.released.map((x) => x.id)).toEqual(['w-1']);
    expect(report.settle!.ms).toBeLessThanOrEqual(1_000);
    expect(report.settle!.items).toBe(1);
  }, 60_000);
});
