// What the progress callback tells a person's display (docs/operator-guide.md, "What the terminal
// shows"): machines released, refused, blocked and failed as they end (each once, also across the passes
// of --wait), machines still running that --wait waits for, items waiting for Omni, what remains, and the time left;
// and, where that display shows the items, the per-item log lines at debug only.

import { Writable } from 'node:stream';
import pino from 'pino';
import { expect, it } from 'vitest';
import {
  bareMetalMachine,
  generateScenario,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { runReport } from '../../src/provider/report/run-report.js';
import { startTamperProxy } from '../helpers/tamper-proxy.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import { silentLogger } from '../../src/log.js';
import { NS_INFRA_PROVIDER, T } from '../../src/omni-api/resource.js';
import type { WipeStrategy } from '../../src/wipe/index.js';
import { FakeState } from '../helpers/fake-state.js';
import * as fx from '../helpers/provider-fixtures.js';
import type { ItemEnded, ReconcileProgress } from '../../src/provider/run/outcomes.js';
import { simEachTest } from '../helpers/sim-client.js';

const omni = simEachTest();

it('counts what ended, runs, waits and the time left; each item ends once; per-item log lines at debug', async () => {
  const sc = generateScenario({ providerId: 'bm', machines: 2, requests: 2, omniVersion: '1.4.2' });
  sc.resources.push(...provisionedRequest('bm', 'new-1', { phase: 'running', outputs: false }));
  sc.resources.push(...bareMetalMachine('bm', machineUuid(7, 1), { phase: 'running' }));
  const sim = await omni.sim(sc);
  const client = await omni.client(sim, 'bm');
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n')) if (l) logLines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const seen: ReconcileProgress[] = [];
  const ended: ItemEnded[] = [];

  const r = await reconcile(
    {
      state: client.state,
      logger,
      version: 'test',
      heartbeatMs: 60_000,
      itemLogLevel: 'debug',
      progress: (p, e) => {
        seen.push(p);
        if (e) ended.push(e);
      },
    },
    {
      providerId: 'bm',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: true,
      timeoutMs: 2_500,
      concurrency: 8,
    },
  );

  // The running machine keeps --wait waiting until the timeout.
  expect(r.timedOut).toBe(true);
  const last = seen.at(-1)!;
  expect(last).toMatchObject({ released: 4, refused: 1, blocked: 0, failed: 0, running: 1, waiting: 0, remaining: 0 });
  expect(seen[0]).toMatchObject({ released: 0, remaining: 4 });
  // The MachineRequestStatuses are torn down and wait for Omni's cleanup finalizer.
  expect(Math.max(...seen.map((p) => p.waiting))).toBeGreaterThanOrEqual(1);
  const left = seen.map((p) => p.timeLeftMs!);
  expect(left.every((ms) => ms >= 0 && ms <= 2_500)).toBe(true);
  expect(left.at(-1)!).toBeLessThan(left[0]!);
  // Each item once, though --wait planned several passes.
  expect(r.passes).toBeGreaterThan(1);
  expect(ended.map((e) => `${e.status} ${e.kind} ${e.id}`).sort()).toEqual(
    [
      `released InfraMachine ${machineUuid(0)}`,
      `released InfraMachine ${machineUuid(1)}`,
      'released MachineRequest workers-000000',
      'released MachineRequest workers-000001',
      'refused MachineRequest new-1',
    ].sort(),
  );
  // The per-item lines are debug (the display shows them); the other lines keep their levels.
  const itemMsgs = new Set([
    'released',
    'cleaned up',
    'blocked',
    'failed',
    'refused new MachineRequest (FAILED status)',
  ]);
  const items = logLines.filter((l) => itemMsgs.has(String(l['msg'])));
  expect(items.length).toBeGreaterThanOrEqual(5);
  expect(items.every((l) => l['level'] === 20)).toBe(true);
  expect(logLines.some((l) => l['level'] === 30 && String(l['msg']).startsWith('announced stub mode'))).toBe(true);
}, 20_000);

it('without itemLogLevel the per-item lines keep their own levels; no progress callback, no counting', async () => {
  const sim = await omni.sim(generateScenario({ providerId: 'bm', machines: 1, omniVersion: '1.4.2' }));
  const client = await omni.client(sim, 'bm');
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n')) if (l) logLines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const r = await reconcile(
    { state: client.state, logger, version: 'test', heartbeatMs: 60_000 },
    {
      providerId: 'bm',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: false,
      timeoutMs: 5_000,
      omniWaitMs: 5_000,
      concurrency: 4,
    },
  );
  expect(r.deregistered).toBe(true);
  expect(logLines.filter((l) => l['msg'] === 'released').map((l) => [l['level'], l['kind']])).toEqual([
    [30, 'InfraMachine'],
    [30, 'deregistration'],
  ]);
});

it('an item blocked on every pass of --wait is shown once; a running machine counts until it is deleted', async () => {
  const U1 = '11111111-1111-1111-1111-111111111111';
  const U2 = '22222222-2222-2222-2222-222222222222';
  const fake = new FakeState([
    fx.providerStatus('bm', true),
    ...fx.bareMetalMachine('bm', U1),
    ...fx.bareMetalMachine('bm', U2, { phase: 'running' }),
  ]);
  setTimeout(() => {
    const im = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U2 })!;
    fake.put({ ...im, metadata: { ...im.metadata, phase: 'tearingDown' } });
  }, 100);
  let wipes = 0;
  const strategy: WipeStrategy = {
    name: 'test',
    wipe: async (m) => {
      if (m.machineId !== U1) return { machineId: m.machineId, strategy: 'test', outcome: 'succeeded', durationMs: 1 };
      wipes++;
      return { machineId: m.machineId, strategy: 'test', outcome: 'failed', reason: 'BMC unreachable', durationMs: 1 };
    },
  };
  const seen: ReconcileProgress[] = [];
  const ended: ItemEnded[] = [];
  const r = await reconcile(
    {
      state: fake,
      logger: silentLogger(),
      version: 'test',
      heartbeatMs: 60_000,
      wipe: { strategy, options: { strategy: 'command', timeoutMs: 1000, requireWipe: true, concurrency: 1 } },
      progress: (p, e) => {
        seen.push(p);
        if (e) ended.push(e);
      },
    },
    {
      providerId: 'bm',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: true,
      timeoutMs: 1_000,
      concurrency: 4,
    },
  );
  expect(r.timedOut).toBe(true);
  expect(wipes).toBeGreaterThanOrEqual(2);
  expect(ended.map((e) => `${e.status} ${e.id}`)).toEqual([`blocked ${U1}`, `released ${U2}`]);
  expect(ended[0]!.reason).toMatch(/^wipe failed: BMC unreachable/);
  expect(seen[0]).toMatchObject({ running: 1, remaining: 1 });
  expect(seen.at(-1)).toMatchObject({ released: 1, blocked: 1, running: 0, remaining: 0 });
}, 10_000);

it('a machine failing in two passes is one failed machine: once in report, on display, in the count', async () => {
  const sim = await omni.sim({
    omniVersion: '1.3.4',
    identities: [{ name: 'infra-provider:kv', role: 'InfraProvider', publicKeys: [] }],
    resources: [
      ...providerRegistration('kv'),
      ...bareMetalMachine('kv', machineUuid(0)),
      ...provisionedRequest('kv', 'r1'),
    ],
    faults: {},
  });
  // Omni refuses the InfraMachine's finalizer removal; the request is released, so a second pass follows.
  const proxy = omni.closing(
    await startTamperProxy(sim.endpoint, (r) => {
      const target = (r.body as { new_resource?: { metadata?: { type?: string } } } | undefined)?.new_resource?.metadata
        ?.type;
      if (r.rpc !== 'Update' || target !== T.InfraMachine) return undefined;
      return {
        kind: 'respond',
        write: (res) => {
          res.writeHead(403, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ code: 7, message: 'refused' }));
        },
      };
    }),
  );
  const client = await omni.client(sim, 'kv', { endpoint: proxy.endpoint });
  const seen: ReconcileProgress[] = [];
  const ended: ItemEnded[] = [];
  const r = await reconcile(
    {
      state: client.state,
      logger: silentLogger(),
      version: 'test',
      heartbeatMs: 60_000,
      progress: (p, e) => {
        seen.push(p);
        if (e) ended.push(e);
      },
    },
    {
      providerId: 'kv',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: false,
      timeoutMs: 10_000,
      omniWaitMs: 5_000,
      concurrency: 4,
    },
  );
  expect(r.passes).toBe(2);
  const rep = runReport(r, { version: 'test', writes: {} });
  expect(rep.failed.map((f) => f.id)).toEqual([machineUuid(0)]);
  expect(ended.filter((e) => e.status === 'failed').map((e) => e.id)).toEqual([machineUuid(0)]);
  expect(seen.at(-1)).toMatchObject({ released: 1, failed: 1, remaining: 0 });
}, 20_000);

it('--timeout does not count the time spent at the confirmation prompt', async () => {
  const U1 = '11111111-1111-1111-1111-111111111111';
  const fake = new FakeState([fx.providerStatus('bm', true), ...fx.bareMetalMachine('bm', U1, { phase: 'running' })]);
  const seen: ReconcileProgress[] = [];
  const started = performance.now();
  const r = await reconcile(
    { state: fake, logger: silentLogger(), version: 'test', heartbeatMs: 60_000, progress: (p) => seen.push(p) },
    {
      providerId: 'bm',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: true,
      timeoutMs: 600,
      concurrency: 4,
      confirm: async () => {
        await new Promise((res) => setTimeout(res, 700));
        return true;
      },
    },
  );
  expect(r.timedOut).toBe(true);
  // Before, the deadline had passed at the prompt: the first count said 0 ms left.
  expect(seen[0]!.timeLeftMs!).toBeGreaterThan(300);
  expect(performance.now() - started).toBeGreaterThanOrEqual(1_200);
}, 10_000);
