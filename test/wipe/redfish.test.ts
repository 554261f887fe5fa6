// Redfish wipes against our own loopback BMC double (test/helpers/redfish-server.ts, HTTPS with a
// certificate made at test time), for what sushy-tools' emulator (test/wipe/redfish-sushy.peer.test.ts: power-off,
// PXE reboot, HTTP and HTTPS, basic auth, refused passwords and certificates) cannot do: Redfish
// sessions (made, used, deleted; refused credentials through one), a PATCH that needs the system's
// ETag, and BMCs that never answer or are not there.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWipeStrategy, runWipes, type MachineFacts, type WipeOptions } from '../../src/wipe/index.js';
import { FakeRedfishBmc, SilentBmc, selfSignedCert } from '../helpers/redfish-server.js';
import { captureLog } from '../helpers/wipe-log.js';

const USER = 'root';
const PASSWORD = 'calvin-Secr3t-pw';
let tls: { key: string; cert: string };

beforeAll(async () => {
  tls = await selfSignedCert();
});

function opts(strategy: WipeOptions['strategy'], port: number, extra: Partial<WipeOptions> = {}): WipeOptions {
  return {
    strategy,
    timeoutMs: 5000,
    requireWipe: false,
    concurrency: 2,
    redfishPort: port,
    redfishScheme: 'https',
    bmcInsecureSkipTlsVerify: true,
    ...extra,
  };
}

function machine(password = PASSWORD, id = 'm-1'): MachineFacts {
  return {
    machineId: id,
    providerId: 'bare-metal',
    bmc: { address: '127.0.0.1', port: 623, username: USER, password },
  };
}

async function wipeOnce(o: WipeOptions, m: MachineFacts, logger = captureLog().logger) {
  const [r] = await runWipes(createWipeStrategy(o, { logger }), [m], { concurrency: 1, timeoutMs: o.timeoutMs });
  return r!;
}

describe('redfish-power-off', () => {
  let bmc: FakeRedfishBmc;
  afterAll(() => bmc?.close());

  it('powers the system off through a session, and deletes the session', async () => {
    bmc = await FakeRedfishBmc.start({ username: USER, password: PASSWORD, auth: 'session', tls });
    const log = captureLog();
    const r = await wipeOnce(opts('redfish-power-off', bmc.port), machine(), log.logger);
    expect(r).toMatchObject({ machineId: 'm-1', strategy: 'redfish-power-off', outcome: 'succeeded' });
    expect(bmc.powerState).toBe('Off');
    expect(bmc.resets).toEqual(['ForceOff']);
    expect(bmc.sessionsCreated).toBe(1);
    expect(bmc.sessionsDeleted).toBe(1);
    expect(bmc.sessions.size).toBe(0);
    // Everything after the login went with the session token, not with the password.
    expect(bmc.requests.filter((q) => q.auth === 'basic')).toEqual([]);
    expect(bmc.requests.some((q) => q.path.endsWith('/Actions/ComputerSystem.Reset') && q.auth === 'token')).toBe(true);
    expect(log.text()).not.toContain(PASSWORD);
    expect(JSON.stringify(r)).not.toContain(PASSWORD);
  });

  it('reports refused credentials as failed, without the password', async () => {
    bmc.powerState = 'On';
    const r = await wipeOnce(opts('redfish-power-off', bmc.port), machine('wrong-password'));
    expect(r).toMatchObject({ outcome: 'failed', reason: 'BMC refused the credentials' });
    expect(bmc.powerState).toBe('On');
  });
});

describe('redfish-pxe-reboot', () => {
  it('sets a one-time PXE boot and restarts a running system (basic auth only BMC, ETag required)', async () => {
    const bmc = await FakeRedfishBmc.start({
      username: USER,
      password: PASSWORD,
      auth: 'basic',
      tls,
      requireEtag: true,
      systemId: '437XR1138R2',
    });
    try {
      const r = await wipeOnce(opts('redfish-pxe-reboot', bmc.port), machine());
      expect(r).toMatchObject({ outcome: 'succeeded' });
      expect(bmc.boot).toEqual({ BootSourceOverrideTarget: 'Pxe', BootSourceOverrideEnabled: 'Once' });
      expect(bmc.resets).toEqual(['ForceRestart']);
      expect(bmc.powerState).toBe('On');
      expect(
        bmc.requests.some(
          (q) => q.method === 'PATCH' && q.path === '/redfish/v1/Systems/437XR1138R2' && q.auth === 'basic',
        ),
      ).toBe(true);
      // Its service root names no sessions: the password is not posted to a session URL it never named.
      expect(bmc.requests.filter((q) => q.path.includes('SessionService'))).toEqual([]);

      const refused = await wipeOnce(opts('redfish-pxe-reboot', bmc.port), machine('not-it'));
      expect(refused).toMatchObject({ outcome: 'failed', reason: 'BMC refused the credentials' });
      expect(bmc.resets).toEqual(['ForceRestart']);
    } finally {
      await bmc.close();
    }
  });
});

describe('unreachable and missing BMCs', () => {
  it('skips a BMC that never answers, at the timeout', async () => {
    const silent = await SilentBmc.start();
    try {
      const started = Date.now();
      const r = await wipeOnce(opts('redfish-power-off', silent.port, { timeoutMs: 400 }), machine());
      expect(r).toMatchObject({ outcome: 'skipped', reason: 'hardware unreachable' });
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await silent.close();
    }
  });

  it('skips a BMC whose port is closed', async () => {
    const bmc = await FakeRedfishBmc.start({ username: USER, password: PASSWORD, auth: 'session', tls });
    const port = bmc.port;
    await bmc.close();
    const r = await wipeOnce(opts('redfish-power-off', port), machine());
    expect(r).toMatchObject({ outcome: 'skipped', reason: 'hardware unreachable' });
  });

  it('skips a machine without BMC data, without any I/O', async () => {
    const r = await wipeOnce(opts('redfish-power-off', 1), { machineId: 'm-2', providerId: 'bare-metal' });
    expect(r).toMatchObject({ machineId: 'm-2', outcome: 'skipped', reason: 'no BMC data' });
  });
});
