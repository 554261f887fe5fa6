// The real provider is (or comes back) alive: an unreadable heartbeat, a newer heartbeat the stub did
// not write, during the heartbeats and during a --wait run; --force overrides.

import { describe, expect, it, vi } from 'vitest';
import { FakeState } from '../../helpers/fake-state.js';
import {
  bareMetalMachine,
  healthStatus,
  providerStatus,
  reconcileOptions,
  res,
} from '../../helpers/provider-fixtures.js';
import { Heartbeat } from '../../../src/provider/run/announce.js';
import { preflight } from '../../../src/provider/run/preflight.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import type { ReconcileOptions } from '../../../src/provider/run/contract.js';
import { silentLogger } from '../../../src/log.js';
import { exitCodeFor } from '../../../src/exit-codes.js';
import {
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  T,
  providerNamespace,
  providerType,
} from '../../../src/omni-api/resource.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';

const opts = (o: Partial<ReconcileOptions> = {}): ReconcileOptions =>
  reconcileOptions(ID, { timeoutMs: 2_000, omniWaitMs: 1_000, ...o });

describe('a heartbeat whose spec does not decode', () => {
  const unreadable = () =>
    new FakeState([
      res(NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, ID, { spec: new Uint8Array([0xff, 0xff, 0xff]) }),
    ]);
  const pre = (state: FakeState, force: boolean) =>
    preflight({ state, providerId: ID, keyProviderId: ID, keyName: `infra-provider:${ID}`, force, now: Date.now });

  it('is treated as a live provider (exit 3) and the message says it could not be read', async () => {
    const err = await pre(unreadable(), false).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect((err as Error).message).toContain('could not be read');
    expect(exitCodeFor(err)).toBe(3);
  });

  it('--force overrides it, and says so', async () => {
    await expect(pre(unreadable(), true)).resolves.toMatchObject({ forced: true });
  });
});

describe('the real provider comes back while the stub sends heartbeats', () => {
  const HB = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID };
  function heartbeat(
    fake: FakeState,
    extra: {
      force?: boolean;
      onLiveProvider?: (e: Error) => void;
      timers?: { setInterval(fn: () => void): unknown; clearInterval(): void };
    } = {},
  ) {
    let t = Date.now();
    return new Heartbeat({
      state: fake,
      providerId: ID,
      version: '0.1.0',
      logger: silentLogger(),
      now: () => (t += 1000),
      ...extra,
    } as never);
  }

  it('a beat finds a newer heartbeat not ours: stops, STUB_LIVE_PROVIDER (exit 3), does not overwrite it', async () => {
    const fake = new FakeState();
    const hb = heartbeat(fake);
    await hb.beat();
    const theirs = fake.put(healthStatus(ID, Date.now() + 1500, ''));
    const err = await hb.beat().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect(exitCodeFor(err)).toBe(3);
    expect(fake.find(HB)!.metadata.version).toBe(theirs.metadata.version);
    expect(hb.beats).toBe(1);
  });

  it('on the interval: reports the live provider once and stops beating', async () => {
    const fake = new FakeState();
    let tick: (() => void) | undefined;
    const seen: Error[] = [];
    const hb = heartbeat(fake, {
      onLiveProvider: (e) => seen.push(e),
      timers: {
        setInterval: (fn) => {
          tick = fn;
          return 1;
        },
        clearInterval: () => {
          tick = undefined;
        },
      },
    });
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

describe('the real provider comes back while a --wait run is going', () => {
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

  it('a live provider: STUB_LIVE_PROVIDER (exit 3), no deregistration (ProviderStatus / TLSConfig kept)', async () => {
    const { fake, tls } = scene();
    const err = await reconcile(
      { state: fake, logger: silentLogger(), version: '0.1.0' },
      opts({ wait: true, timeoutMs: 2_000 }),
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect(exitCodeFor(err)).toBe(3);
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeDefined();
    expect(fake.find(tls.metadata)).toBeDefined();
    expect(
      fake.find({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID })!.metadata.owner,
    ).toBe(`${ID}.ProviderHealthStatusController`);
  });

  it('with --force the run goes on and deregisters', async () => {
    const { fake, tls } = scene();
    const r = await reconcile(
      { state: fake, logger: silentLogger(), version: '0.1.0' },
      opts({ wait: true, timeoutMs: 2_000, force: true }),
    );
    expect(r.deregistered).toBe(true);
    expect(fake.find(tls.metadata)).toBeUndefined();
  });

  it('without a heartbeat of its own (no announcement), a live heartbeat still stops the deregistration', async () => {
    const fake = new FakeState([providerStatus(ID, true), healthStatus(ID, Date.now())]);
    const err = await reconcile({ state: fake, logger: silentLogger(), version: '0.1.0' }, opts()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'STUB_LIVE_PROVIDER' });
    expect(fake.find({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })).toBeDefined();
  });
});
