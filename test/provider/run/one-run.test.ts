// One run per provider at a time (docs/design.md rule 7): the heartbeat names its run; another run's
// live heartbeat is waited for (stale: go on; refreshed: STUB_CONCURRENT_RUN), the heartbeat is the
// run's first write and its lock, a run taken over mid-run stops starting anything (STUB_RUN_TAKEN_OVER),
// a run that ends without deregistering marks its heartbeat ended; and a wipe at most once among
// overlapping runs, --machine runs included (run/wipe-claim.ts).

import { describe, expect, it } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import { bareMetalMachine, healthStatus, providerStatus, reconcileOptions } from '../../helpers/provider-fixtures.js';
import { heartbeatError } from '../../../src/provider/run/announce.js';
import { ANNOTATION_RUN, ANNOTATION_RUN_ENDED, preflight } from '../../../src/provider/run/preflight.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import type { ReconcileDeps, ReconcileOptions } from '../../../src/provider/run/contract.js';
import { runReport } from '../../../src/provider/report/run-report.js';
import { silentLogger } from '../../../src/log.js';
import { exitCodeFor } from '../../../src/exit-codes.js';
import { NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T } from '../../../src/omni-api/resource.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import { ANNOTATION_WIPE_CLAIM } from '../../../src/provider/run/wipe-claim.js';
import type { WipeStrategy } from '../../../src/wipe/index.js';

const ID = 'bare-metal';
const HB = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID };
const uuid = (i: number) => `00000000-0000-4000-8000-${i.toString().padStart(12, '0')}`;

/** A heartbeat of another stub-provider run, `ageMs` old. */
function otherRunsHeartbeat(ageMs: number, run = 'run-a', ended = false): Resource {
  const r = healthStatus(ID, Date.now() - ageMs, heartbeatError(ID, run));
  r.metadata.annotations[ANNOTATION_RUN] = run;
  if (ended) r.metadata.annotations[ANNOTATION_RUN_ENDED] = new Date().toISOString();
  return r;
}

/** Another run beating: its heartbeat written again with a fresh timestamp. */
async function beatAgain(fake: FakeState, run = 'run-a'): Promise<void> {
  const cur = fake.find(HB)!;
  const fresh = otherRunsHeartbeat(0, run);
  await fake.update(
    { metadata: { ...cur.metadata, annotations: fresh.metadata.annotations }, spec: fresh.spec },
    {
      owner: cur.metadata.owner,
    },
  );
}

const pre = (state: FakeState, o: { force?: boolean; liveMs?: number } = {}) =>
  preflight({
    state,
    providerId: ID,
    keyProviderId: ID,
    keyName: `infra-provider:${ID}`,
    force: o.force ?? false,
    now: Date.now,
    waitForOtherRun: { pollMs: 20, liveMs: o.liveMs ?? 400 },
  });

describe('another run of the stub found by preflight', () => {
  it('refreshed while this run waits: exit 3 STUB_CONCURRENT_RUN naming it, nothing written', async () => {
    const fake = new FakeState([otherRunsHeartbeat(50)]);
    const beating = setInterval(() => void beatAgain(fake), 60);
    try {
      const err = await pre(fake).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'STUB_CONCURRENT_RUN' });
      expect((err as Error).message).toMatch(/another stub-provider run \(run-a\) of provider bare-metal is under way/);
      expect(exitCodeFor(err)).toBe(3);
    } finally {
      clearInterval(beating);
    }
    expect(fake.writes.filter((w) => w.pointer.type !== T.InfraProviderHealthStatus)).toEqual([]);
  });

  it('not refreshed (its run was killed): goes on once it is stale, saying how long it waited', async () => {
    const started = Date.now();
    const r = await pre(new FakeState([otherRunsHeartbeat(100)]), { liveMs: 400 });
    expect(r.concurrentRun).toMatchObject({ runId: 'run-a' });
    expect(r.concurrentRun!.waitedMs).toBeGreaterThanOrEqual(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('marked ended, or --force: goes on at once (--force says so)', async () => {
    const started = Date.now();
    const ended = await pre(new FakeState([otherRunsHeartbeat(100, 'run-a', true)]), { liveMs: 60_000 });
    expect(ended.concurrentRun).toBeUndefined();
    const forced = await pre(new FakeState([otherRunsHeartbeat(100)]), { force: true, liveMs: 60_000 });
    expect(forced.concurrentRun).toMatchObject({ runId: 'run-a', forced: true });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

const opts = (o: Partial<ReconcileOptions> = {}): ReconcileOptions =>
  reconcileOptions(ID, { timeoutMs: 10_000, omniWaitMs: 2_000, ...o });

/** A wipe that takes `ms` and records each machine it wipes. */
function slowWipe(wiped: string[], ms: number): ReconcileDeps['wipe'] {
  const strategy: WipeStrategy = {
    name: 'test',
    wipe: async (m) => {
      wiped.push(m.machineId);
      await new Promise((r) => setTimeout(r, ms));
      return { machineId: m.machineId, strategy: 'test', outcome: 'succeeded', durationMs: ms };
    },
  };
  return { strategy, options: { strategy: 'command', timeoutMs: 5_000, requireWipe: false, concurrency: 4 } };
}

describe('the heartbeat is the run lock', () => {
  it('two runs at once: one releases every machine, the other stops at its first write (exit 3)', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...[1, 2, 3].flatMap((i) => bareMetalMachine(ID, uuid(i)))]);
    const wiped: string[] = [];
    const deps = (runId: string) => ({
      state: fake,
      logger: silentLogger(),
      version: '0.1.0',
      runId,
      wipe: slowWipe(wiped, 50),
    });
    const [a, b] = await Promise.allSettled([reconcile(deps('run-a'), opts()), reconcile(deps('run-b'), opts())]);
    const ok = [a, b].filter((x) => x.status === 'fulfilled');
    const refused = [a, b].filter((x) => x.status === 'rejected');
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'STUB_CONCURRENT_RUN' });
    expect(wiped.sort()).toEqual([uuid(1), uuid(2), uuid(3)]);
  });

  it('taken over mid-run (another run forced in): starts nothing more, exit 5 STUB_RUN_TAKEN_OVER', async () => {
    const fake = new FakeState([
      providerStatus(ID, true),
      ...[1, 2, 3, 4].flatMap((i) => bareMetalMachine(ID, uuid(i))),
    ]);
    const wiped: string[] = [];
    const timers = { handles: [] as (() => void)[] };
    const r = await reconcile(
      {
        state: fake,
        logger: silentLogger(),
        version: '0.1.0',
        runId: 'run-a',
        // One machine at a time; the other run writes the heartbeat while the first wipe runs.
        wipe: {
          ...slowWipe(wiped, 0),
          strategy: {
            name: 'test',
            wipe: async (m) => {
              wiped.push(m.machineId);
              if (wiped.length === 1) {
                await beatAgain(fake, 'run-b');
                for (const beat of timers.handles) beat();
                await new Promise((res) => setTimeout(res, 50));
              }
              return { machineId: m.machineId, strategy: 'test', outcome: 'succeeded', durationMs: 1 };
            },
          },
          options: { strategy: 'command', timeoutMs: 5_000, requireWipe: false, concurrency: 1 },
        },
        timers: {
          setInterval: (fn) => {
            timers.handles.push(fn);
            return fn;
          },
          clearInterval: () => undefined,
        },
      },
      opts({ concurrency: 1 }),
    );
    expect(r.takenOver).toMatchObject({ code: 'STUB_RUN_TAKEN_OVER', otherRun: 'run-b' });
    expect(wiped).toHaveLength(1);
    expect(r.deregistered).toBe(false);
    const rep = runReport(r, { version: '0.1.0', writes: {} });
    expect(rep).toMatchObject({ result: 'incomplete', exitCode: 5, runId: 'run-a' });
    expect(rep.notStarted.length).toBeGreaterThan(0);
    expect(rep.failed).toEqual([]);
    // The heartbeat is the other run's now: not marked ended by this one.
    expect(fake.find(HB)!.metadata.annotations).toEqual({ [ANNOTATION_RUN]: 'run-b' });
  });

  it('a run that ends without deregistering marks its heartbeat ended; the next run does not wait', async () => {
    const fake = new FakeState([
      providerStatus(ID, true),
      ...bareMetalMachine(ID, uuid(1)),
      ...bareMetalMachine(ID, uuid(2), { phase: 'running' }),
    ]);
    await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0', runId: 'run-a' }, opts());
    const hb = fake.find(HB)!;
    expect(hb.metadata.annotations[ANNOTATION_RUN]).toBe('run-a');
    expect(hb.metadata.annotations[ANNOTATION_RUN_ENDED]).toBeDefined();
    const r = await pre(fake, { liveMs: 60_000 });
    expect(r.concurrentRun).toBeUndefined();
  });
});

describe('a wipe at most once among overlapping runs', () => {
  it('two --machine runs of one machine at once: one wipe; the other run leaves it blocked, not failed', async () => {
    const fake = new FakeState(bareMetalMachine(ID, uuid(1)));
    const wiped: string[] = [];
    const run = (runId: string) =>
      reconcile(
        { state: fake, logger: silentLogger(), version: '0.1.0', runId, wipe: slowWipe(wiped, 100) },
        opts({ machines: [uuid(1)] }),
      );
    const [a, b] = await Promise.all([run('run-a'), run('run-b')]);
    expect(wiped).toEqual([uuid(1)]);
    const outcomes = [a, b].map((r) => r.outcomes.find((o) => o.kind === 'InfraMachine')!);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['blocked', 'released']);
    expect(outcomes.find((o) => o.status === 'blocked')!.reason).toMatch(
      /being wiped and released by another run \(run-(a|b), claimed at .*\); not wiped by this run/,
    );
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: uuid(1) })).toBeUndefined();
  });

  it("a claim of a run that is gone (past its time) is taken over; this run's own claim is its own", async () => {
    const resources = bareMetalMachine(ID, uuid(1));
    const ims = resources.find((r) => r.metadata.type === T.InfraMachineStatus)!;
    ims.metadata.annotations[ANNOTATION_WIPE_CLAIM] = JSON.stringify({
      run: 'gone-run',
      at: new Date(Date.now() - 600_000).toISOString(),
      until: new Date(Date.now() - 1_000).toISOString(),
    });
    const fake = new FakeState(resources);
    const wiped: string[] = [];
    const r = await reconcile(
      { state: fake, logger: silentLogger(), version: '0.1.0', runId: 'run-b', wipe: slowWipe(wiped, 1) },
      opts({ machines: [uuid(1)] }),
    );
    expect(wiped).toEqual([uuid(1)]);
    expect(r.outcomes[0]).toMatchObject({ status: 'released' });
  });
});
