// Regression tests of review findings on src/provider and src/commands (one describe per finding).

import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { FakeState } from '../helpers/fake-state.js';
import { bareMetalMachine, healthStatus, providerStatus, res } from '../helpers/provider-fixtures.js';
import { Heartbeat } from '../../src/provider/announce.js';
import { preflight } from '../../src/provider/preflight.js';
import { reconcile } from '../../src/provider/reconcile.js';
import type { ReconcileOptions } from '../../src/provider/reconcile.js';
import { silentLogger } from '../../src/log.js';
import { askYesNo } from '../../src/commands/run-io.js';
import { StubError, exitCodeFor } from '../../src/exit-codes.js';
import { LABEL_IS_STATIC_INFRA_PROVIDER, NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T, providerNamespace, providerType } from '../../src/omni-client/resource.js';
import type { ProfileOption } from '../../src/provider/profile.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';

function opts(o: Partial<ReconcileOptions> = {}): ReconcileOptions {
  return { providerId: ID, machines: [], profile: 'auto', stateTypes: [], deregister: true, wait: false, timeoutMs: 2_000, omniWaitMs: 1_000, concurrency: 4, ...o };
}

describe('review 4: --require-wipe and a re-run after an Omni finalizer held the InfraMachineStatus (Omni < 1.3)', () => {
  it('the second run can still release the machine (its first run wiped it already) and says why it did not wipe again', async () => {
    const wiped: string[] = [];
    const strategy = {
      name: 'test',
      wipe: async (m: { machineId: string; bmc?: { address?: string } }) => {
        if (!m.bmc?.address) return { machineId: m.machineId, strategy: 'test', outcome: 'skipped' as const, reason: 'no BMC data', durationMs: 1 };
        wiped.push(m.machineId);
        return { machineId: m.machineId, strategy: 'test', outcome: 'succeeded' as const, durationMs: 1 };
      },
    };
    const wipe = { strategy, options: { strategy: 'command' as const, timeoutMs: 1000, requireWipe: true, concurrency: 1 } };
    const fake = new FakeState(bareMetalMachine(ID, U1, { omniOnStatus: true }));
    fake.omni.releasesOnTeardown.delete('MachineStatusController'); // Omni slow this time
    const r1 = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0', wipe: wipe as never }, opts({ machines: [U1], omniWaitMs: 50 }));
    expect(wiped).toEqual([U1]);
    expect(r1.outcomes[0]).toMatchObject({ status: 'blocked' });
    // Omni caught up: its controller lets go of the InfraMachineStatus; the Job retries.
    fake.omni.releasesOnTeardown.add('MachineStatusController');
    const ims = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: U1 })!;
    fake.put({ ...ims, metadata: { ...ims.metadata, finalizers: [] } });
    const r2 = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0', wipe: wipe as never }, opts({ machines: [U1], omniWaitMs: 500 }));
    expect(r2.outcomes[0]).toMatchObject({ status: 'released' });
    expect(wiped).toEqual([U1]); // not wiped twice
    expect(r2.firstPlan.leftBehind.map((n) => n.reason).join(' ')).toMatch(/wipe not repeated.*already cleaned up by an earlier run/);
  });
});

describe('review 5: Ctrl-C at the [y/N] prompt', () => {
  function terminal(): PassThrough & { isTTY: boolean; setRawMode: () => unknown } {
    const input = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => input });
    return input;
  }

  it('is an interruption (exit 130) that says nothing was changed, not an internal error', async () => {
    const input = terminal();
    const asked = askYesNo(input, new PassThrough(), 'Make these changes? [y/N] ');
    input.write('\x03'); // what a terminal in raw mode sends for Ctrl-C
    const err = await asked.then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StubError);
    expect(err).toMatchObject({ code: 'STUB_INTERRUPTED', message: 'interrupted at the confirmation prompt; nothing was changed' });
    expect(exitCodeFor(err)).toBe(130);
  });

  it('still reads an answer', async () => {
    const input = terminal();
    const asked = askYesNo(input, new PassThrough(), '? ');
    input.write('y\r');
    await expect(asked).resolves.toBe(true);
  });
});

describe('review 6a: a heartbeat whose spec does not decode', () => {
  const unreadable = () => new FakeState([res(NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, ID, { spec: new Uint8Array([0xff, 0xff, 0xff]) })]);
  const pre = (state: FakeState, force: boolean) => preflight({ state, providerId: ID, keyProviderId: ID, keyName: `infra-provider:${ID}`, force, now: Date.now });

  it('is treated as a live provider (exit 3) and the message says it could not be read', async () => {
    const err = await pre(unreadable(), false).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect((err as Error).message).toContain('could not be read');
    expect(exitCodeFor(err)).toBe(3);
  });

  it('--force overrides it, and says so', async () => {
    await expect(pre(unreadable(), true)).resolves.toMatchObject({ forced: true });
  });
});

describe('review 3: the real provider comes back while the stub sends heartbeats', () => {
  const HB = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID };
  function heartbeat(fake: FakeState, extra: { force?: boolean; onLiveProvider?: (e: Error) => void; timers?: { setInterval(fn: () => void): unknown; clearInterval(): void } } = {}) {
    let t = Date.now();
    return new Heartbeat({ state: fake, providerId: ID, version: '0.1.0', logger: silentLogger(), now: () => (t += 1000), ...extra } as never);
  }

  it('a beat finds a newer heartbeat stub-provider did not write: stops with STUB_LIVE_PROVIDER (exit 3) and does not overwrite it', async () => {
    const fake = new FakeState();
    const hb = heartbeat(fake);
    await hb.beat();
    const theirs = fake.put(healthStatus(ID, Date.now() + 1500, ''));
    const err = await hb.beat().then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect(exitCodeFor(err)).toBe(3);
    expect(fake.find(HB)!.metadata.version).toBe(theirs.metadata.version);
    expect(hb.beats).toBe(1);
  });

  it('on the interval: reports the live provider once and stops beating', async () => {
    const fake = new FakeState();
    let tick: (() => void) | undefined;
    const seen: Error[] = [];
    const hb = heartbeat(fake, { onLiveProvider: (e) => seen.push(e), timers: { setInterval: (fn) => { tick = fn; return 1; }, clearInterval: () => { tick = undefined; } } });
    await hb.start();
    fake.put(healthStatus(ID, Date.now() + 1500, ''));
    tick!();
    await vi.waitFor(() => expect(seen).toHaveLength(1), { timeout: 1000 });
    expect((seen[0] as { code?: string }).code).toBe('STUB_LIVE_PROVIDER');
    expect(tick).toBeUndefined(); // the interval was cleared by the beat itself
    await hb.stop();
  });

  it('--force keeps beating over it', async () => {
    const fake = new FakeState();
    const hb = heartbeat(fake, { force: true });
    await hb.beat();
    fake.put(healthStatus(ID, Date.now() + 1500, ''));
    await hb.beat();
    expect(hb.beats).toBe(2);
  });
});

describe('review 1: a re-run after deregistration', () => {
  for (const wait of [false, true]) {
    it(`${wait ? 'with' : 'without'} --wait writes nothing (does not re-create ProviderStatus / heartbeat) and asks nothing`, async () => {
      const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
      const first = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts());
      expect(first.deregistered).toBe(true);
      expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
      const writes = fake.writes.length;
      // A retried Job (or an operator) runs again.
      let asked = 0;
      const again = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait, confirm: async () => { asked++; return true; } }));
      expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
      expect(fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID })).toBeUndefined();
      expect(fake.writes.slice(writes).map((w) => `${w.method} ${w.pointer.type}`)).toEqual([]);
      expect(again.announced).toBe(false);
      expect(asked).toBe(0);
    });
  }
});

describe('review 2: --wait when only the provider statuses are left and no heartbeat exists (ephemeral, lost at an Omni restart)', () => {
  it('deregisters without leaving the heartbeat it created itself', async () => {
    const fake = new FakeState([providerStatus(ID, true)]);
    const r = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait: true }));
    expect(r.deregistered).toBe(true);
    expect(r.announced).toBe(true);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeUndefined();
    expect(fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID })).toBeUndefined();
  });

  it('a ProviderStatus the run created (it was missing) goes too', async () => {
    const fake = new FakeState([healthStatus(ID, Date.now() - 3_600_000, 'stub-provider: earlier run')]);
    const r = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait: true }));
    expect(r.deregistered).toBe(true);
    expect(fake.all()).toEqual([]);
  });
});

describe('review 3: the real provider comes back while a --wait run is going', () => {
  function scene() {
    const tls = res(providerNamespace(ID), providerType('TLSConfig', ID), 'tls-config');
    const fake = new FakeState([providerStatus(ID, true), tls, ...bareMetalMachine(ID, U1, { phase: 'running' })]);
    setTimeout(() => {
      // The real provider is back: fresh heartbeat without our marker, and it handles its machine itself.
      fake.put(healthStatus(ID, Date.now()));
      for (const r of fake.all().filter((x) => x.metadata.id === U1)) fake.remove(r.metadata);
    }, 100);
    return { fake, tls };
  }

  it('stops with STUB_LIVE_PROVIDER (exit 3) and does not deregister (destroy ProviderStatus / TLSConfig) under a live provider', async () => {
    const { fake, tls } = scene();
    const err = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait: true, timeoutMs: 2_000 })).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect(exitCodeFor(err)).toBe(3);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeDefined();
    expect(fake.find(tls.metadata)).toBeDefined();
    expect(fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID })!.metadata.owner).toBe(`${ID}.ProviderHealthStatusController`);
  });

  it('with --force the run goes on and deregisters', async () => {
    const { fake, tls } = scene();
    const r = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ wait: true, timeoutMs: 2_000, force: true }));
    expect(r.deregistered).toBe(true);
    expect(fake.find(tls.metadata)).toBeUndefined();
  });

  it('without a heartbeat of its own (no announcement), a live heartbeat still stops the deregistration', async () => {
    const fake = new FakeState([providerStatus(ID, true), healthStatus(ID, Date.now())]);
    const err = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts()).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeDefined();
  });
});

describe('review 6b: the static label of a ProviderStatus the stub creates follows the facts', () => {
  async function labelAfter(profile: ProfileOption, machines: boolean): Promise<boolean> {
    const fake = new FakeState(machines ? bareMetalMachine(ID, U1, { phase: 'running' }) : []);
    // A new MachineRequest makes the run announce (a refusal is due); no ProviderStatus exists yet.
    fake.put(res(NS_INFRA_PROVIDER, T.MachineRequest, 'req-1', { labels: { 'omni.sidero.dev/infra-provider-id': ID } }));
    await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts({ profile, deregister: false }));
    const ps = fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID });
    expect(ps).toBeDefined();
    return Object.hasOwn(ps!.metadata.labels, LABEL_IS_STATIC_INFRA_PROVIDER);
  }

  it('InfraMachines exist: labelled static even with --profile provisioning, and with auto', async () => {
    expect(await labelAfter('provisioning', true)).toBe(true);
    expect(await labelAfter('auto', true)).toBe(true);
  });

  it('--profile bare-metal: labelled; no InfraMachines and not bare-metal: not labelled', async () => {
    expect(await labelAfter('bare-metal', false)).toBe(true);
    expect(await labelAfter('provisioning', false)).toBe(false);
    expect(await labelAfter('auto', false)).toBe(false);
  });
});
