// The stub adapts to back-pressure (docs/design.md rule 14), against the simulated Omni over loopback HTTP,
// through the command's own path (runIn: the CLI's parser, the client, the audit log, the report).
//   - A throttled Omni (Omni 1.9's write budget for infra providers: DeadlineExceeded once a write's
//     bytes would not be there within maxWait) and a rate-limiting proxy (429 with Retry-After):
//     everything is released, no item fails, and the report says how much it was throttled.
//   - A write whose answer is lost (the sim applies it, then the connection breaks): read back, not
//     applied twice, reported once (one intent and one outcome in the audit log, one report entry).

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { T, type Resource } from '../../src/omni-api/resource.js';
import type { FaultConfig } from '../../src/omni-sim/gateway/fault-config.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import type { AuditEntry } from '../../src/provider/report/audit.js';
import { renderText } from '../../src/provider/report/text.js';
import { runIn } from '../helpers/cli-config.js';
import { checkRelease } from '../helpers/release-oracle.js';
import { startTamperProxy } from '../helpers/tamper-proxy.js';
import { simEachTest } from '../helpers/sim-client.js';

const ID = 'bare-metal';

const omni = simEachTest();
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'back-pressure-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** `machines` stuck bare-metal machines and `requests` stuck MachineRequests of ours, on Omni 1.9.3. */
async function stuckSim(machines: number, requests: number, extra: Resource[] = []): Promise<Sim> {
  const resources: Resource[] = [...providerRegistration(ID, { static: true }), ...extra];
  for (let i = 0; i < machines; i++) resources.push(...bareMetalMachine(ID, machineUuid(i, 1)));
  for (let i = 0; i < requests; i++) resources.push(...provisionedRequest(ID, `req-${i}`));
  const s = await createSim({
    omniVersion: '1.9.3',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    resources,
    faults: {},
  });
  await s.controllers?.idle();
  return s;
}

async function auditOf(file: string): Promise<AuditEntry[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AuditEntry);
}

/**
 * Runs the stub with `faults` on and checks that everything was released, nothing failed, and the state is exactly the
 * expected one.
 */
async function releasedUnder(s: Sim, faults: FaultConfig, expected: number) {
  const before = s.store.all();
  s.faults.set(faults);
  const audit = join(dir, 'audit.ndjson');
  const rep = await runIn(s, ID, ['--audit-log', audit]);
  await s.controllers?.idle();
  const after = s.store.all();
  expect(rep.failed).toEqual([]);
  expect(rep.result).toBe('done');
  expect(rep.exitCode).toBe(0);
  expect(rep.released).toHaveLength(expected);
  expect(rep.deregistration.status).toBe('deregistered');
  expect(checkRelease(before, after, { providerId: ID, complete: true, deregistered: true }).problems).toEqual([]);
  // Every write has its outcome; none was refused for good.
  const lines = await auditOf(audit);
  const intents = lines.filter((l) => l.event === 'intent').length;
  expect(lines.filter((l) => l.event === 'outcome')).toHaveLength(intents);
  return { rep, lines };
}

describe('a throttled Omni', () => {
  it('Omni 1.9 write budget (DeadlineExceeded past maxWait): released, none failed, throttling reported', async () => {
    const sim = omni.closing(await stuckSim(10, 4));
    // About 400 bytes a write: 20 KB/s with a 2 KB burst and a 40 ms wait let a few of 8 concurrent
    // writes through and refuse the rest at once with DeadlineExceeded, as Omni's limiter does.
    const { rep } = await releasedUnder(
      sim,
      { throttle: { infraProvider: { bytesPerSecond: 20_000, burst: 2_000 }, maxWaitMs: 40 } },
      14,
    );
    const st = sim.faults.throttle!.stats().infraProvider;
    // The budget really refused writes, and the stub rode them out.
    expect(st.failedTimeout).toBeGreaterThan(0);
    expect(rep.throttling).toBeDefined();
    const t = rep.throttling!;
    expect(t.signals).toBeGreaterThanOrEqual(st.failedTimeout);
    expect(t.minWritesInFlight).toBeLessThan(8);
    expect(t.maxWritesInFlight).toBe(8);
    expect(t.gaveUp).toBe(0);
    expect(t.retriedWrites + t.foundApplied).toBeGreaterThan(0);
    expect(Date.parse(t.firstSignalAt!)).toBeLessThanOrEqual(Date.parse(t.lastSignalAt!));
    expect(renderText(rep)).toMatch(
      /Omni throttled: \d+ signals?, waited \d+\.\d s \(writes in flight down to \d of 8\)/,
    );
  });

  it('a write Omni\'s budget refused and a read-back showed not applied is "refused", never "unknown"', async () => {
    const sim = omni.closing(await stuckSim(10, 4));
    const { rep, lines } = await releasedUnder(
      sim,
      { throttle: { infraProvider: { bytesPerSecond: 20_000, burst: 2_000 }, maxWaitMs: 40 } },
      14,
    );
    expect(sim.faults.throttle!.stats().infraProvider.failedTimeout).toBeGreaterThan(0);
    const outcomes = lines.filter((l) => l.event === 'outcome');
    const throttled = outcomes.filter((l) => l.errorCode === 'OMNI_DEADLINE_EXCEEDED');
    expect(throttled.length).toBeGreaterThan(0);
    expect(throttled.filter((l) => l.result === 'unknown')).toEqual([]);
    const key = (l: AuditEntry) => `${l.op} ${l.resource.type}/${l.resource.id}`;
    for (const o of throttled.filter((l) => l.result === 'refused')) {
      // Sent again later, as a write of its own.
      expect(
        lines.some((l) => l.event === 'intent' && l.seq > o.seq && key(l) === key(o)),
        key(o),
      ).toBe(true);
    }
    expect(Object.keys(rep.writes).filter((k) => k.endsWith(':unknown'))).toEqual([]);
    expect(Object.keys(rep.writes).some((k) => k.endsWith(':refused'))).toBe(true);
  });

  it('a proxy answering 429 + Retry-After to every call over its rate: all released, no item failed', async () => {
    const sim = omni.closing(await stuckSim(4, 2));
    const { rep } = await releasedUnder(
      sim,
      { proxyLimit: { requestsPerSecond: 40, burst: 12, status: 429, retryAfterS: 1 } },
      6,
    );
    expect(sim.faults.proxyLimit!.stats().refused).toBeGreaterThan(0);
    // Reads refused are retried by the transport after Retry-After; the writes refused are signals.
    expect(rep.throttling?.gaveUp ?? 0).toBe(0);
  });
});

describe('a write whose answer was lost', () => {
  it('the sim applies it, then the connection breaks: read back, not applied twice, reported once', async () => {
    // The machine is also held by one of Omni's finalizers, so it outlives our release: the re-read
    // finds it at the version our Update made, with our content. (One that Omni destroys at once
    // answers the re-read NotFound; read from a List only, that is not taken for done, rule 4.)
    const target = machineUuid(100, 1);
    const sim = omni.closing(
      await stuckSim(2, 0, bareMetalMachine(ID, target, { extraFinalizers: ['ClusterMachineController'] })),
    );
    const ours = (fs: string[]) => fs.some((f) => f.startsWith(`${ID}.`));
    // Server side: every Update that removed our finalizers from that InfraMachine.
    let applied = 0;
    sim.store.onEvent((e) => {
      const m = e.resource.metadata;
      if (
        m.type === T.InfraMachine &&
        m.id === target &&
        e.old &&
        ours(e.old.metadata.finalizers) &&
        !ours(m.finalizers)
      )
        applied++;
    });
    let dropped = 0;
    const proxy = omni.closing(
      await startTamperProxy(sim.endpoint, (r) => {
        const md = (r.body as { new_resource?: { metadata?: { type?: string; id?: string } } } | undefined)
          ?.new_resource?.metadata;
        if (r.rpc === 'Update' && md?.type === T.InfraMachine && md.id === target && dropped === 0) {
          dropped++;
          return { kind: 'drop-answer' };
        }
        return undefined;
      }),
    );
    const audit = join(dir, 'audit.ndjson');
    const rep = await runIn(sim, ID, ['--audit-log', audit, '--settle', '0'], { endpoint: proxy.endpoint });
    await sim.controllers?.idle();
    expect(dropped).toBe(1);
    expect(applied).toBe(1);
    // Sent once: the re-read showed it had taken effect.
    const sent = proxy.seen.filter(
      (r) =>
        r.rpc === 'Update' &&
        (r.body as { new_resource?: { metadata?: { id?: string; type?: string } } }).new_resource?.metadata?.id ===
          target &&
        (r.body as { new_resource: { metadata: { type?: string } } }).new_resource.metadata.type === T.InfraMachine,
    );
    expect(sent).toHaveLength(1);
    // Reported once: one intent and one outcome for that write, one entry in the report.
    const lines = (await auditOf(audit)).filter(
      (l) => l.resource.type === T.InfraMachine && l.resource.id === target && l.op === 'update',
    );
    expect(lines.map((l) => l.event)).toEqual(['intent', 'outcome']);
    // Its outcome is what the read-back showed: applied.
    expect(lines[1]).toMatchObject({ result: 'ok', evidence: 'read-back', errorCode: 'STUB_TRANSPORT' });
    expect(rep.failed).toEqual([]);
    expect(rep.result).toBe('done');
    expect(rep.released.filter((x) => x.id === target)).toEqual([{ kind: 'InfraMachine', id: target }]);
    expect(rep.throttling).toMatchObject({ lostAnswers: 1, foundApplied: 1, retriedWrites: 0, gaveUp: 0, signals: 0 });
    expect(
      sim.store.all().find((r) => r.metadata.type === T.InfraMachine && r.metadata.id === target)?.metadata.finalizers,
    ).toEqual(['ClusterMachineController']);
  });
});
