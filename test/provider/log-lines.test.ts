// One log line per action. Every mutation the stub makes (create, update, teardown,
// destroy) is one info line naming the resource, besides the per-machine "released" line; checked
// against the audit log, which has an intent and an outcome line per write by construction.

import { Writable } from 'node:stream';
import pino from 'pino';
import { expect, it } from 'vitest';
import { describePointer } from '../../src/omni-api/resource.js';
import { generateScenario, provisionedRequest } from '../../src/omni-sim/scenario/generate.js';
import { Audit } from '../../src/provider/report/audit.js';
import type { AuditEntry, AuditOutcome } from '../../src/provider/report/audit.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import { simEachTest } from '../helpers/sim-client.js';

const omni = simEachTest();

it('one info line per mutation, naming the resource, plus one "released" line per machine', async () => {
  const sc = generateScenario({ providerId: 'bm', machines: 3, requests: 2, omniVersion: '1.4.2' });
  // A new request (no status yet): refused with a FAILED status, a create.
  sc.resources.push(...provisionedRequest('bm', 'new-1', { phase: 'running', outputs: false }));
  const sim = await omni.sim(sc);
  const logLines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l) logLines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  const entries: AuditEntry[] = [];
  const audit = new Audit((l) => entries.push(JSON.parse(l) as AuditEntry), Date.now, logger);
  const client = await omni.client(sim, 'bm', {
    onWrite: audit.observer,
  });

  const r = await reconcile(
    { state: client.state, logger, version: 'test', heartbeatMs: 60_000 },
    {
      providerId: 'bm',
      machines: [],
      profile: 'auto',
      stateTypes: [],
      deregister: true,
      wait: false,
      timeoutMs: 20_000,
      omniWaitMs: 10_000,
      concurrency: 8,
    },
  );
  expect(r.refusals).toEqual([expect.objectContaining({ id: 'new-1', result: 'refused' })]);

  const audited = entries.filter((e): e is AuditOutcome => e.event === 'outcome' && e.result === 'ok');
  expect(entries.filter((e) => e.event === 'intent')).toHaveLength(audited.length);
  const mutations = logLines.filter((l) => typeof l['op'] === 'string');
  expect(mutations.every((l) => l['level'] === 30)).toBe(true);
  const key = (op: unknown, resource: unknown) => `${String(op)} ${String(resource)}`;
  expect(mutations.map((l) => key(l['op'], l['resource'])).sort()).toEqual(
    audited.map((e) => key(e.op, describePointer(e.resource))).sort(),
  );
  // Every kind of mutation was exercised.
  expect(new Set(audited.map((e) => e.op))).toEqual(new Set(['create', 'update', 'teardown', 'destroy']));
  const released = logLines.filter((l) => l['msg'] === 'released');
  expect(released.map((l) => `${String(l['kind'])}/${String(l['id'])}`).sort()).toEqual(
    [
      ...[0, 1, 2].map((i) => `InfraMachine/00000000-0000-4000-8000-00000000000${i}`),
      'MachineRequest/workers-000000',
      'MachineRequest/workers-000001',
    ].sort(),
  );
  // A finalizer removal says which finalizers went; no spec ever reaches a log line.
  expect(
    mutations.some(
      (l) =>
        Array.isArray(l['finalizersRemoved']) &&
        (l['finalizersRemoved'] as string[]).includes('bm.WipeStatusController'),
    ),
  ).toBe(true);
  expect(JSON.stringify(logLines)).not.toMatch(/protoSpec|proto_spec|password/);
});
