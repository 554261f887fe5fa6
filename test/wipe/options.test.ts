// The wipe flags through the CLI's parser, their validation, the command splitter and BMC facts from specs.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/exit-codes.js';
import { machineFactsFromBmc, wipeBlocksRelease, wipeCliOptions } from '../../src/wipe/index.js';
import { CommandSyntaxError, splitCommand } from '../../src/wipe/argv.js';
import { runConfigFrom } from '../helpers/cli-config.js';

/** The wipe options of `stub-provider --id x <args>`, parsed as the CLI parses them. */
function parse(args: string[], env: NodeJS.ProcessEnv = {}) {
  return runConfigFrom(['--id', 'x', '--omni-api-endpoint', 'http://127.0.0.1:1', ...args], env).wipe;
}

describe('wipe flags', () => {
  it('defaults: no wipe, 30 s, lanplus with cipher suite 3, Redfish on 443 over https', () => {
    expect(parse([])).toEqual({
      strategy: 'none',
      timeoutMs: 30_000,
      requireWipe: false,
      concurrency: 4,
      redfishPort: 443,
      redfishScheme: 'https',
      bmcInsecureSkipTlsVerify: false,
      ipmiInterface: 'lanplus',
      ipmiCipherSuite: 3,
    });
  });

  it('reads every flag', () => {
    const o = parse([
      '--wipe',
      'redfish-pxe-reboot',
      '--wipe-timeout',
      '2.5',
      '--require-wipe',
      '--redfish-port',
      '8443',
      '--redfish-scheme',
      'http',
      '--bmc-insecure-skip-tls-verify',
      '--ipmi-interface',
      'lan',
      '--ipmi-cipher-suite',
      '17',
      '--wipe-concurrency',
      '8',
    ]);
    expect(o).toMatchObject({
      strategy: 'redfish-pxe-reboot',
      timeoutMs: 2500,
      requireWipe: true,
      concurrency: 8,
      redfishPort: 8443,
      redfishScheme: 'http',
      bmcInsecureSkipTlsVerify: true,
      ipmiInterface: 'lan',
      ipmiCipherSuite: 17,
    });
  });

  it('--wipe-timeout is a duration like every other: 30s, 1m, 1m30s, 250ms; a bare number is seconds', () => {
    expect(['30s', '1m', '1m30s', '250ms', '30', '1h'].map((v) => parse(['--wipe-timeout', v]).timeoutMs)).toEqual([
      30_000, 60_000, 90_000, 250, 30_000, 3_600_000,
    ]);
    expect(parse([], { STUB_PROVIDER_WIPE_TIMEOUT: '2m' }).timeoutMs).toBe(120_000);
  });

  it('--wipe command takes its command', () => {
    expect(parse(['--wipe', 'command', '--wipe-command', '/usr/local/bin/off --hard'])).toMatchObject({
      strategy: 'command',
      command: '/usr/local/bin/off --hard',
    });
  });

  it.each([
    [['--wipe', 'command'], /--wipe command needs --wipe-command/],
    [['--wipe', 'command', '--wipe-command', '  '], /--wipe command needs --wipe-command/],
    [['--wipe', 'command', '--wipe-command', 'off "unterminated'], /--wipe-command: unterminated double quote/],
    [['--wipe', 'ipmi-power-off', '--wipe-command', 'off'], /--wipe-command is only used with --wipe command/],
    [['--require-wipe'], /--require-wipe with --wipe none would block every machine/],
    [['--wipe-timeout', '0'], /--wipe-timeout must be more than zero/],
    [['--wipe-timeout', 'soon'], /--wipe-timeout must be a duration like 90s/],
    [['--wipe-timeout', '61m'], /--wipe-timeout must be at most 1h/],
    [['--redfish-port', '70000'], /--redfish-port must be a whole number from 1 to 65535/],
    [['--ipmi-cipher-suite', '18'], /--ipmi-cipher-suite must be a whole number from 0 to 17/],
    [['--wipe-concurrency', '0'], /--wipe-concurrency must be a whole number/],
  ])('%j is a usage error', (args, message) => {
    let err: unknown;
    try {
      parse(args);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).exitCode).toBe(2);
    expect((err as Error).message).toMatch(message);
  });

  it('yargs itself refuses an unknown strategy', () => {
    expect(() => parse(['--wipe', 'shred'])).toThrow(/^--wipe "shred": expected none, command, redfish-power-off/);
    expect(() => parse([], { STUB_PROVIDER_WIPE: 'shred' })).toThrow(
      /^environment variable STUB_PROVIDER_WIPE="shred": expected none, command/,
    );
  });

  it('every flag has a description', () => {
    for (const [name, o] of Object.entries(wipeCliOptions)) expect(o.describe, name).toBeTruthy();
  });

  it('--require-wipe blocks the release of every machine whose wipe did not succeed', () => {
    const r = (outcome: 'succeeded' | 'failed' | 'skipped') => ({
      machineId: 'm',
      strategy: 's',
      outcome,
      durationMs: 0,
    });
    expect([r('succeeded'), r('failed'), r('skipped')].map((x) => wipeBlocksRelease(x, { requireWipe: true }))).toEqual(
      [false, true, true],
    );
    expect(
      [r('succeeded'), r('failed'), r('skipped')].map((x) => wipeBlocksRelease(x, { requireWipe: false })),
    ).toEqual([false, false, false]);
  });
});

describe('splitCommand', () => {
  it.each([
    ['off', ['off']],
    ['  /bin/off   --hard  ', ['/bin/off', '--hard']],
    [`p "a b" 'c d' e\\ f`, ['p', 'a b', 'c d', 'e f']],
    [`p "say \\"hi\\"" 'it''s'`, ['p', 'say "hi"', 'its']],
    [`p '' ""`, ['p', '', '']],
    [`p $HOME ; rm -rf / | x > y`, ['p', '$HOME', ';', 'rm', '-rf', '/', '|', 'x', '>', 'y']],
    [`p "a\\nb"`, ['p', 'a\\nb']],
  ])('%s', (input, words) => {
    expect(splitCommand(input)).toEqual(words);
  });

  it('refuses unterminated quotes and a trailing backslash', () => {
    expect(() => splitCommand(`p 'x`)).toThrow(CommandSyntaxError);
    expect(() => splitCommand(`p "x`)).toThrow(/unterminated double quote/);
    expect(() => splitCommand(`p \\`)).toThrow(/lone backslash/);
  });

  it('round-trips any words quoted with single quotes', () => {
    const word = fc.string({ minLength: 0, maxLength: 12 }).filter((w) => !w.includes("'"));
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 6 }), (words) => {
        expect(splitCommand(words.map((w) => `'${w}'`).join(' '))).toEqual(words);
      }),
    );
  });
});

describe('machineFactsFromBmc', () => {
  const ipmi = { address: '10.0.0.9', port: 623, username: 'ADMIN', password: 'pw' };

  it('reads the bare-metal BMCConfigurationSpec', () => {
    expect(machineFactsFromBmc('m', 'bare-metal', { ipmi, api: { address: '' } })).toEqual({
      machineId: 'm',
      providerId: 'bare-metal',
      bmc: { address: '10.0.0.9', port: 623, username: 'ADMIN', password: 'pw' },
    });
  });

  it("reads Omni's BMCConfigSpec (config wrapper), including the api address", () => {
    expect(
      machineFactsFromBmc('m', 'p', { config: { ipmi: { ...ipmi, port: 0 }, api: { address: '10.0.0.1:8070' } } }).bmc,
    ).toEqual({
      address: '10.0.0.9',
      username: 'ADMIN',
      password: 'pw',
      apiAddress: '10.0.0.1:8070',
    });
  });

  it('treats proto3 defaults and missing specs as no BMC data', () => {
    expect(machineFactsFromBmc('m', 'p')).toEqual({ machineId: 'm', providerId: 'p' });
    expect(
      machineFactsFromBmc('m', 'p', undefined, null, { ipmi: { address: '', port: 0 } }, { config: null }),
    ).toEqual({ machineId: 'm', providerId: 'p' });
  });

  it('uses the first spec that holds data, whole', () => {
    const r = machineFactsFromBmc(
      'm',
      'p',
      { ipmi: {} },
      { config: { ipmi: { address: 'b', username: 'u2' } } },
      { ipmi },
    );
    expect(r.bmc).toEqual({ address: 'b', username: 'u2' });
  });
});
