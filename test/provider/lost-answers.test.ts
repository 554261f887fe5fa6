// A lost answer is judged on what we sent (docs/design.md rule 14, docs/omni-wire.md 4.5 "Server-added"): for every
// Create, Update and Destroy a run makes, the simulated Omni applies that write and loses its answer; the read-back
// compares what the write set (Omni's own provider label left out), finds it applied, sends nothing again, and the
// run ends as a clean one does, with the write counted as found applied.

import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { createOmniClient } from '../../src/omni-client/client.js';
import type { WriteIntent } from '../../src/omni-client/write/observer.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { T } from '../../src/omni-api/resource.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { createSim } from '../../src/omni-sim/index.js';
import { Audit } from '../../src/provider/report/audit.js';
import { throttlingOf } from '../../src/provider/report/report.js';
import { runReport } from '../../src/provider/report/run-report.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import { healthStatus, reconcileOptions } from '../helpers/provider-fixtures.js';

interface Fleet {
  id: string;
  resources: Resource[];
  /** The methods its run uses. */
  methods: WriteIntent['method'][];
}

/**
 * A bare-metal provider with its ProviderStatus and an earlier run's heartbeat: releases, clean-ups, the
 * announcement's and the heartbeat's Updates, deregistration.
 */
const bareMetal: Fleet = {
  id: 'bare-metal',
  resources: [
    ...providerRegistration('bare-metal', { static: true }),
    healthStatus('bare-metal', Date.now() - 3_600_000, 'stub-provider: an earlier run'),
    ...bareMetalMachine('bare-metal', machineUuid(0)),
    ...bareMetalMachine('bare-metal', machineUuid(1)),
  ],
  methods: ['Update', 'Destroy'],
};

/** An SDK provider without a ProviderStatus or heartbeat, and a new request: the first Creates, and a refusal's. */
const sdk: Fleet = {
  id: 'kubevirt',
  resources: [
    ...providerRegistration('kubevirt').filter((r) => r.metadata.type === T.InfraProvider),
    ...provisionedRequest('kubevirt', 'held-0'),
    ...provisionedRequest('kubevirt', 'held-1'),
    ...provisionedRequest('kubevirt', 'new-0', { phase: 'running', outputs: false }),
  ],
  methods: ['Create', 'Update', 'Destroy'],
};

/** A run of `fleet` on Omni 1.9.3 with `lose` on, as `run` assembles it: its report, its writes, what is left. */
async function runWith(fleet: Fleet, lose?: { method: WriteIntent['method']; type: string }) {
  const sim = await createSim({
    omniVersion: '1.9.3',
    identities: [{ name: `infra-provider:${fleet.id}`, role: 'InfraProvider', publicKeys: [] }],
    resources: fleet.resources,
    faults: {},
  });
  try {
    await sim.controllers?.idle();
    if (lose) sim.faults.set({ loseWriteAnswers: { count: 1, ...lose } });
    const writes: string[] = [];
    const audit = new Audit();
    const client = await createOmniClient({
      endpoint: sim.endpoint,
      key: sim.keys[`infra-provider:${fleet.id}`]!,
      concurrency: 4,
      onWrite: (intent) => {
        writes.push(`${intent.method} ${intent.resource.type}`);
        return audit.observer(intent);
      },
    });
    let result;
    try {
      result = await reconcile(
        { state: client.state, logger: silentLogger(), version: 'test' },
        reconcileOptions(fleet.id, { omniWaitMs: 10_000, settleMs: 0 }),
      );
    } catch (err) {
      return { error: `${(err as { code?: string }).code ?? ''} ${(err as Error).message}`, writes, lost: 0 };
    } finally {
      await client.close();
      audit.close('the run ended');
    }
    const throttling = throttlingOf(client.throttling());
    const report = runReport(result, { version: 'test', writes: audit.counts, throttling });
    await sim.controllers?.idle();
    const left = sim.store
      .all()
      .map((r) => `${r.metadata.namespace}/${r.metadata.type}/${r.metadata.id}`)
      .sort();
    return { report, writes, left, lost: sim.faults.config.loseWriteAnswers?.count ?? 0 };
  } finally {
    await sim.close();
  }
}

describe.each([bareMetal, sdk])('every write of a run of $id with its answer lost', (fleet) => {
  it('is read back, not sent again; a Create or Destroy found applied; the run ends as a clean one', async () => {
    const clean = await runWith(fleet);
    if (!clean.report) throw new Error(clean.error);
    expect(clean.report.exitCode).toBe(0);
    const kinds = [...new Set(clean.writes)];
    const count = (writes: string[], kind: string) => writes.filter((w) => w === kind).length;
    for (const method of fleet.methods)
      expect(kinds.filter((k) => k.startsWith(`${method} `)).length, method).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const kind of kinds) {
      const [method, type] = kind.split(' ') as [WriteIntent['method'], string];
      const r = await runWith(fleet, { method, type });
      if (!r.report) {
        problems.push(`${kind}: ${r.error}`);
        continue;
      }
      const t = r.report.throttling;
      // An Update's read-back may find that Omni's controllers moved the resource on already (a teardown let go,
      // a release destroyed): someone else's change, re-read and planned again; never sent twice.
      const foundApplied = method === 'Update' ? (t?.foundApplied ?? 0) <= 1 : t?.foundApplied === 1;
      if (r.lost !== 0) problems.push(`${kind}: no answer was lost`);
      else if (
        r.report.exitCode !== 0 ||
        r.report.result !== clean.report.result ||
        t?.lostAnswers !== 1 ||
        !foundApplied ||
        t.retriedWrites !== 0 ||
        count(r.writes, kind) !== count(clean.writes, kind) ||
        JSON.stringify(r.left) !== JSON.stringify(clean.left)
      )
        problems.push(
          `${kind}: exit ${r.report.exitCode} ${r.report.result}, lost ${t?.lostAnswers ?? 0}, found applied ` +
            `${t?.foundApplied ?? 0}, sent again ${t?.retriedWrites ?? 0}, ${count(r.writes, kind)} sent (clean ` +
            `${count(clean.writes, kind)})`,
        );
    }
    expect(problems).toEqual([]);
  }, 120_000);
});
