// The Redfish wipes against a Redfish service we did not write: sushy-tools 2.2.0's emulator
// (test/helpers/sushy.ts) with its fake system driver, on loopback, over HTTP and over HTTPS with a
// self-signed certificate made at test time, without auth and with basic auth (sushy-tools has no
// SessionService, so our client uses basic auth). What the emulated system
// reports afterwards is the evidence: PowerState Off after redfish-power-off; the PXE boot override
// and an accepted restart after redfish-pxe-reboot. Faults the emulator cannot produce (a BMC that
// never answers, a closed port, an ETag it insists on) stay with our own double in test/wipe/redfish.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWipeStrategy, runWipes, type MachineFacts, type WipeOptions } from '../../src/wipe/index.js';
import { selfSignedCert } from '../helpers/redfish-server.js';
import { SushyEmulator, type SushyOptions } from '../helpers/sushy.js';
import { captureLog } from '../helpers/wipe-log.js';

const USER = 'redfish-operator';
const PASSWORD = 'sushy-Secr3t-pw';
let tls: { key: string; cert: string };
const emulators: SushyEmulator[] = [];

beforeAll(async () => {
  tls = await selfSignedCert();
});

afterAll(async () => {
  await Promise.all(emulators.map((e) => e.close()));
});

async function emulator(o: SushyOptions): Promise<SushyEmulator> {
  const e = await SushyEmulator.start(o);
  emulators.push(e);
  return e;
}

function opts(strategy: WipeOptions['strategy'], e: SushyEmulator, extra: Partial<WipeOptions> = {}): WipeOptions {
  return {
    strategy,
    timeoutMs: 15_000,
    requireWipe: false,
    concurrency: 1,
    redfishPort: e.port,
    redfishScheme: e.scheme,
    bmcInsecureSkipTlsVerify: e.scheme === 'https',
    ...extra,
  };
}

function machine(password = PASSWORD): MachineFacts {
  return {
    machineId: 'm-sushy',
    providerId: 'bare-metal',
    bmc: { address: '127.0.0.1', port: 623, username: USER, password },
  };
}

async function wipeOnce(o: WipeOptions, m: MachineFacts, logger = captureLog().logger) {
  const [r] = await runWipes(createWipeStrategy(o, { logger }), [m], { concurrency: 1, timeoutMs: o.timeoutMs });
  return r!;
}

const https = () => ({ tls, user: { name: USER, password: PASSWORD } });

// Each test waits up to 20 s for the fake driver's delayed power change; they run side by side.
describe.concurrent('Redfish wipes against sushy-tools 2.2.0 (fake driver)', { timeout: 60_000 }, () => {
  it('redfish-power-off over HTTPS with basic auth: the system reports Off', async () => {
    const e = await emulator({ systems: [{ name: 'node-a', power_state: 'On' }], ...https() });
    const [uuid] = e.uuids;
    const log = captureLog();
    const r = await wipeOnce(opts('redfish-power-off', e), machine(), log.logger);
    expect(r).toMatchObject({ outcome: 'succeeded', reason: 'ForceOff accepted (PowerState was On)' });
    expect(await e.resets(uuid!)).toEqual(['ForceOff']);
    expect((await e.waitFor(uuid!, (s) => s.PowerState === 'Off')).PowerState).toBe('Off');
    // Its service root names no sessions: basic auth from the start, the password never posted to a
    // session URL the service did not name, and no session to delete afterwards.
    const requests = await e.requests();
    expect(requests.filter((q) => q.includes('SessionService') || q.startsWith('DELETE '))).toEqual([]);
    expect(requests.filter((q) => q.endsWith(' 401'))).toEqual([]);
    expect(log.text()).not.toContain(PASSWORD);
    expect(JSON.stringify(r)).not.toContain(PASSWORD);
  });

  it('redfish-power-off over plain HTTP without auth: the system reports Off', async () => {
    const e = await emulator({ systems: [{ name: 'node-b', power_state: 'On' }] });
    const [uuid] = e.uuids;
    const r = await wipeOnce(
      opts('redfish-power-off', e, { redfishScheme: 'http', bmcInsecureSkipTlsVerify: false }),
      machine(),
    );
    expect(r).toMatchObject({ outcome: 'succeeded' });
    expect((await e.waitFor(uuid!, (s) => s.PowerState === 'Off')).PowerState).toBe('Off');
    expect((await e.requests()).filter((q) => q.includes('SessionService'))).toEqual([]);
  });

  it('redfish-power-off leaves a system that is already Off alone', async () => {
    const e = await emulator({ systems: [{ name: 'node-c', power_state: 'Off' }], ...https() });
    const r = await wipeOnce(opts('redfish-power-off', e), machine());
    expect(r).toMatchObject({ outcome: 'succeeded', reason: 'already off' });
    expect(await e.resets(e.uuids[0]!)).toEqual([]);
    expect((await e.system(e.uuids[0]!)).PowerState).toBe('Off');
  });

  it('redfish-pxe-reboot sets the PXE boot override and restarts a running system', async () => {
    const e = await emulator({ systems: [{ name: 'node-d', power_state: 'On' }], ...https() });
    const [uuid] = e.uuids;
    expect((await e.system(uuid!)).Boot?.BootSourceOverrideTarget).toBe('Hdd');
    const r = await wipeOnce(opts('redfish-pxe-reboot', e), machine());
    expect(r).toMatchObject({ outcome: 'succeeded', reason: 'one-time PXE boot set; ForceRestart accepted' });
    expect(await e.bootDevicesSet(uuid!)).toEqual(['Pxe']);
    expect(await e.resets(uuid!)).toEqual(['ForceRestart']);
    // The fake driver goes Off at once for a restart and back On when it "finishes" it.
    const after = await e.waitFor(uuid!, (s) => s.PowerState === 'On');
    expect(after.PowerState).toBe('On');
    expect(after.Boot?.BootSourceOverrideTarget).toBe('Pxe');
    // sushy-tools records no "Once": its fake driver reports every override as Continuous.
    expect(after.Boot?.BootSourceOverrideEnabled).toBe('Continuous');
  });

  it('redfish-pxe-reboot powers on a system that is Off instead of restarting it', async () => {
    const e = await emulator({ systems: [{ name: 'node-e', power_state: 'Off' }], ...https() });
    const [uuid] = e.uuids;
    const r = await wipeOnce(opts('redfish-pxe-reboot', e), machine());
    expect(r).toMatchObject({ outcome: 'succeeded', reason: 'one-time PXE boot set; On accepted' });
    expect(await e.resets(uuid!)).toEqual(['On']);
    const after = await e.waitFor(uuid!, (s) => s.PowerState === 'On');
    expect(after).toMatchObject({ PowerState: 'On', Boot: { BootSourceOverrideTarget: 'Pxe' } });
  });

  it('reports a wrong password as refused credentials, and changes nothing', async () => {
    const e = await emulator({ systems: [{ name: 'node-f', power_state: 'On' }], ...https() });
    const log = captureLog();
    const r = await wipeOnce(opts('redfish-power-off', e), machine('not-the-password'), log.logger);
    expect(r).toMatchObject({ outcome: 'failed', reason: 'BMC refused the credentials' });
    expect(await e.resets(e.uuids[0]!)).toEqual([]);
    expect((await e.requests()).some((q) => q.startsWith('POST ') && q.includes('ComputerSystem.Reset'))).toBe(false);
    expect((await e.system(e.uuids[0]!)).PowerState).toBe('On');
    expect(log.text()).not.toContain('not-the-password');
  });

  it('refuses its self-signed certificate unless told to skip verification', async () => {
    const e = await emulator({ systems: [{ name: 'node-g', power_state: 'On' }], ...https() });
    const r = await wipeOnce(opts('redfish-power-off', e, { bmcInsecureSkipTlsVerify: false }), machine());
    expect(r.outcome).toBe('failed');
    expect(r.reason).toMatch(/TLS verification.*--bmc-insecure-skip-tls-verify/);
    expect(await e.requests()).toEqual([]);
  });

  it('with several systems, acts on the first member of the Systems collection only', async () => {
    const e = await emulator({
      systems: [
        { name: 'node-h1', power_state: 'On' },
        { name: 'node-h2', power_state: 'On' },
      ],
      ...https(),
    });
    const [first, second] = (await e.members()).map((p) => p.split('/').pop()!);
    const log = captureLog();
    const r = await wipeOnce(opts('redfish-power-off', e), machine(), log.logger);
    expect(r.outcome).toBe('succeeded');
    expect(log.text()).toContain('the BMC manages several systems; using the first');
    expect(await e.resets(first!)).toEqual(['ForceOff']);
    expect(await e.resets(second!)).toEqual([]);
    expect((await e.waitFor(first!, (s) => s.PowerState === 'Off')).PowerState).toBe('Off');
    expect((await e.system(second!)).PowerState).toBe('On');
  });
});
