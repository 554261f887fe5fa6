// IPMI wipes against a real IPMI peer: ipmi_sim (openipmi) on loopback, driven through ipmitool.

import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createWipeStrategy,
  runWipes,
  IPMITOOL_MISSING,
  type MachineFacts,
  type WipeOptions,
} from '../../src/wipe/index.js';
import { ipmitoolBaseArgs } from '../../src/wipe/ipmi.js';
import { IpmiSim } from '../helpers/ipmi-sim.js';
import { captureLog } from '../helpers/wipe-log.js';

const USER = 'admin';
const PASSWORD = 'ipmi-Pa55-word';
let sim: IpmiSim;

beforeAll(async () => {
  sim = await IpmiSim.start({ username: USER, password: PASSWORD });
});
afterAll(() => sim?.stop());

function machine(password = PASSWORD, port = sim.port): MachineFacts {
  return {
    machineId: 'm-ipmi',
    providerId: 'bare-metal',
    bmc: { address: '127.0.0.1', port, username: USER, password },
  };
}

async function wipeOnce(
  o: Partial<WipeOptions> & Pick<WipeOptions, 'strategy'>,
  m: MachineFacts,
  deps: { path?: string } = {},
) {
  const log = captureLog();
  const full: WipeOptions = { timeoutMs: 8000, requireWipe: false, concurrency: 1, ...o };
  const [r] = await runWipes(createWipeStrategy(full, { logger: log.logger, ...deps }), [m], {
    concurrency: 1,
    timeoutMs: full.timeoutMs,
  });
  return { r: r!, logs: log.text() };
}

describe('ipmi wipes against ipmi_sim', () => {
  it('ipmi-power-off over lan turns the chassis off', async () => {
    sim.powerOn = true;
    const { r, logs } = await wipeOnce({ strategy: 'ipmi-power-off', ipmiInterface: 'lan' }, machine());
    expect(r).toMatchObject({ machineId: 'm-ipmi', strategy: 'ipmi-power-off', outcome: 'succeeded' });
    expect(sim.powerOn).toBe(false);
    expect(logs).not.toContain(PASSWORD);
    expect(JSON.stringify(r)).not.toContain(PASSWORD);
  });

  it('ipmi-power-off (lanplus, cipher suite 0) turns the chassis off; an off one is reported already off', async () => {
    sim.powerOn = true;
    const first = await wipeOnce(
      { strategy: 'ipmi-power-off', ipmiInterface: 'lanplus', ipmiCipherSuite: 0 },
      machine(),
    );
    expect(first.r.outcome).toBe('succeeded');
    expect(sim.powerOn).toBe(false);
    const before = sim.history.length;
    const second = await wipeOnce(
      { strategy: 'ipmi-power-off', ipmiInterface: 'lanplus', ipmiCipherSuite: 0 },
      machine(),
    );
    expect(second.r).toMatchObject({ outcome: 'succeeded', reason: 'already off' });
    expect(sim.history.length).toBe(before);
  });

  it('ipmi-pxe-reboot sets PXE boot and cycles a running chassis', async () => {
    sim.powerOn = true;
    const before = sim.history.length;
    const { r } = await wipeOnce({ strategy: 'ipmi-pxe-reboot', ipmiInterface: 'lan' }, machine());
    expect(r.outcome).toBe('succeeded');
    expect(sim.bootDevice).toBe('pxe');
    const changes = sim.history.slice(before);
    expect(changes).toContain('boot=pxe');
    expect(changes).toContain('power=0');
  });

  it('ipmi-pxe-reboot powers on a chassis that is off', async () => {
    sim.powerOn = false;
    const { r } = await wipeOnce({ strategy: 'ipmi-pxe-reboot', ipmiInterface: 'lan' }, machine());
    expect(r.outcome).toBe('succeeded');
    expect(sim.powerOn).toBe(true);
    expect(sim.bootDevice).toBe('pxe');
  });

  it('a wrong password over lan fails with "BMC refused the credentials" and leaves the chassis alone', async () => {
    sim.powerOn = true;
    // One short attempt: ipmitool's default retries take about 8 s to give up.
    const { r, logs } = await wipeOnce(
      { strategy: 'ipmi-power-off', ipmiInterface: 'lan', ipmiAttemptTimeoutS: 1, ipmiRetries: 1 },
      machine('wrong-secret'),
    );
    expect(r).toMatchObject({ outcome: 'failed', reason: 'BMC refused the credentials' });
    expect(sim.powerOn).toBe(true);
    expect(logs).not.toContain('wrong-secret');
  });

  it('a BMC that does not answer is skipped as unreachable at the timeout', async () => {
    const { r } = await wipeOnce(
      { strategy: 'ipmi-power-off', ipmiInterface: 'lan', timeoutMs: 700 },
      machine(PASSWORD, 9),
    );
    expect(r).toMatchObject({ outcome: 'skipped', reason: 'hardware unreachable' });
  });
});

describe('ipmitool invocation', () => {
  it('never puts the password on the command line, and passes -C only with lanplus', () => {
    const m = machine(PASSWORD, 6230);
    const lanplus = ipmitoolBaseArgs(m, { interface: 'lanplus', cipherSuite: 17 });
    expect(lanplus).toEqual(['-I', 'lanplus', '-C', '17', '-H', '127.0.0.1', '-p', '6230', '-U', USER, '-E']);
    const lan = ipmitoolBaseArgs(m, { interface: 'lan', cipherSuite: 17 });
    expect(lan).toEqual(['-I', 'lan', '-H', '127.0.0.1', '-p', '6230', '-U', USER, '-E']);
    expect([...lan, ...lanplus].join(' ')).not.toContain(PASSWORD);
    expect(lanplus).not.toContain('-P');
  });

  it('passes the password only through IPMI_PASSWORD (seen by a fake ipmitool)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fake-ipmitool-'));
    const fake = join(dir, 'ipmitool');
    writeFileSync(fake, `#!/bin/sh\necho "$@" >> "${dir}/argv"\nenv >> "${dir}/env"\necho "Chassis Power is off"\n`);
    chmodSync(fake, 0o755);
    const { r } = await wipeOnce({ strategy: 'ipmi-power-off', ipmitoolPath: fake }, machine(PASSWORD, 6231));
    expect(r).toMatchObject({ outcome: 'succeeded', reason: 'already off' });
    expect(readFileSync(join(dir, 'argv'), 'utf8')).not.toContain(PASSWORD);
    const env = readFileSync(join(dir, 'env'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('=')[0])
      .sort();
    expect(env).toContain('IPMI_PASSWORD');
    expect(readFileSync(join(dir, 'env'), 'utf8')).toContain(`IPMI_PASSWORD=${PASSWORD}`);
    expect(env).not.toContain('OMNI_SERVICE_ACCOUNT_KEY');
  });

  it('says how to install ipmitool when it is not on PATH', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'no-ipmitool-'));
    const { r } = await wipeOnce({ strategy: 'ipmi-power-off' }, machine(), { path: empty });
    expect(r).toMatchObject({ outcome: 'failed', reason: IPMITOOL_MISSING });
    expect(r.reason).toBe('ipmitool not found on PATH: install it (Debian: apt-get install ipmitool)');
  });

  it('skips a machine without BMC data', async () => {
    const { r } = await wipeOnce({ strategy: 'ipmi-power-off' }, { machineId: 'm-x', providerId: 'bare-metal' });
    expect(r).toMatchObject({ outcome: 'skipped', reason: 'no BMC data' });
  });
});
