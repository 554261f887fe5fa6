// Every command's command line is parsed once, by the CLI's parser, into the configuration its code
// runs with (RunConfig, PlanConfig, SimConfig, DemoConfig): numbers and durations as numbers, files
// resolved, each value checked there; a value flag given twice is refused for every flag alike.

import { describe, expect, it } from 'vitest';
import { configFrom } from '../src/cli.js';
import { CliUsageError } from '../src/cli-args.js';
import { COMMANDS } from '../src/commands/index.js';
import { SCENARIOS_DIR } from '../src/commands/scenario-file.js';
import { UsageError } from '../src/exit-codes.js';
import { planConfigFrom, runConfigFrom } from './helpers/cli-config.js';

const ENDPOINT = 'http://127.0.0.1:1';
const base = ['--id', 'bare-metal', '--omni-api-endpoint', ENDPOINT];

describe('run', () => {
  it('the defaults, typed: durations in ms, the wipe options, where the result goes', () => {
    expect(runConfigFrom(base)).toEqual({
      id: 'bare-metal',
      endpoint: ENDPOINT,
      insecureSkipTlsVerify: false,
      machines: [],
      profile: 'auto',
      stateTypes: [],
      concurrency: 16,
      streamIdleMs: 30_000,
      maxListItems: expect.any(Number),
      logLevel: 'info',
      target: { providerId: 'bare-metal', output: 'text', inputs: expect.any(Array) },
      wait: false,
      timeoutMs: 600_000,
      stepTimeoutMs: 60_000,
      settleMs: 5000,
      deregister: true,
      yes: false,
      force: false,
      wipe: expect.objectContaining({ strategy: 'none', timeoutMs: 30_000 }),
    });
  });

  it('reads each flag from the command line or the environment; the command line wins', () => {
    const c = runConfigFrom(
      [
        ...base,
        '--wait',
        '--timeout',
        '0',
        '--step-timeout',
        '1m30s',
        '--settle',
        '0s',
        '--no-deregister',
        '-y',
        '--machine',
        'a,b',
        '--machine',
        'a',
        '-o',
        'yaml',
        '--report',
        'r.json',
        '--audit-log',
        'a.ndjson',
      ],
      { STUB_PROVIDER_CONCURRENCY: '4', STUB_PROVIDER_TIMEOUT: '5m', STUB_PROVIDER_LOG_FORMAT: 'json', NO_COLOR: '1' },
    );
    expect(c).toMatchObject({
      wait: true,
      timeoutMs: Number.POSITIVE_INFINITY,
      stepTimeoutMs: 90_000,
      settleMs: 0,
      deregister: false,
      yes: true,
      machines: ['a', 'b'],
      concurrency: 4,
      logFormat: 'json',
      color: false,
    });
    expect(c.target).toMatchObject({ output: 'yaml', reportFile: 'r.json', auditLog: 'a.ndjson' });
    expect(runConfigFrom(base, { OMNI_ENDPOINT: 'https://omni.example.com' }).endpoint).toBe(ENDPOINT);
    expect(runConfigFrom(['--id', 'x'], { OMNI_ENDPOINT: 'https://omni.example.com' }).endpoint).toBe(
      'https://omni.example.com',
    );
  });

  it.each([
    ['id', ['--id', 'other']],
    ['timeout', ['--timeout', '1m', '--timeout', '2m']],
    ['concurrency', ['--concurrency', '8', '--concurrency', '8']],
    ['output', ['-o', 'json', '--output', 'yaml']],
    ['report', ['--report', 'a.json', '--report', 'b.json']],
    ['wipe', ['--wipe', 'ipmi-power-off', '--wipe', 'none']],
    ['log-level', ['--log-level', 'debug', '--log-level', 'info']],
  ])('--%s given twice (however spelt) is a usage error naming it', (flag, twice) => {
    expect(() => runConfigFrom([...base, ...twice])).toThrow(UsageError);
    expect(() => runConfigFrom([...base, ...twice])).toThrow(
      new RegExp(`^--${flag} is given 2 times \\(.*\\): give it once$`),
    );
  });

  it('a value yargs cannot refuse is refused by the parse, before anything runs', () => {
    expect(() => runConfigFrom([...base, '--settle', 'soon'])).toThrow(/--settle must be a duration like 90s/);
    expect(runConfigFrom([...base, '--stream-idle-timeout', '2m']).streamIdleMs).toBe(120_000);
    expect(runConfigFrom(base, { STUB_PROVIDER_STREAM_IDLE_TIMEOUT: '45s' }).streamIdleMs).toBe(45_000);
    expect(() => runConfigFrom([...base, '--stream-idle-timeout', '0'])).toThrow(
      /--stream-idle-timeout must be more than zero/,
    );
    expect(() => runConfigFrom([...base, '--concurrency', '0'])).toThrow(
      /--concurrency must be an integer from 1 to 1024 \(got 0\)/,
    );
    expect(() => runConfigFrom(['--id', 'a b', '--omni-api-endpoint', ENDPOINT])).toThrow(/contains white space/);
    expect(() => runConfigFrom(base, { STUB_PROVIDER_CONCURRENCY: 'many' })).toThrow(CliUsageError);
  });

  it('what yargs refuses stays refused: an unknown flag, a flag of another command', () => {
    expect(() => runConfigFrom([...base, '--machines', 'x'])).toThrow(
      /unknown flag --machines: did you mean --machine\?/,
    );
    expect(() => runConfigFrom([...base, '--from-dump', 'x'])).toThrow(/--from-dump is a flag of `stub-provider plan`/);
  });
});

describe('plan', () => {
  it('--from-dump names a file or a shipped example, resolved there; no endpoint then', () => {
    const c = planConfigFrom(['--id', 'bare-metal', '--from-dump', 'bare-metal-stuck.omnictl']);
    expect(c.fromDump).toEqual({
      value: 'bare-metal-stuck.omnictl',
      file: `${SCENARIOS_DIR}/bare-metal-stuck.omnictl.yaml`,
    });
    expect(c.endpoint).toBe('');
    expect(c.target.inputs).toContainEqual({ flag: '--from-dump', path: 'bare-metal-stuck.omnictl' });
    expect(() => planConfigFrom(['--id', 'bare-metal', '--from-dump', 'no-such-dump'])).toThrow(
      /--from-dump no-such-dump: no such file/,
    );
    expect(() => planConfigFrom([...base, '--from-dump', 'bare-metal-stuck'])).toThrow(/drop --omni-api-endpoint/);
  });

  it('--wipe only says whether each chain starts with a wipe step', () => {
    expect(planConfigFrom(base).wipeStep).toBe(false);
    expect(planConfigFrom([...base, '--wipe', 'redfish-power-off']).wipeStep).toBe(true);
  });
});

describe('sim and demo', () => {
  it('sim: the listen address parsed, the scenario resolved, --tls-ca-out only with --tls', () => {
    expect(
      configFrom(
        'sim',
        ['--scenario', 'bare-metal-stuck', '--listen', '[::1]:8099', '--keys-dir', 'k', '--no-color'],
        {},
      ),
    ).toEqual({
      scenario: { value: 'bare-metal-stuck', file: `${SCENARIOS_DIR}/bare-metal-stuck.yaml` },
      listen: { host: '::1', port: 8099 },
      tls: false,
      keysDir: 'k',
      color: false,
    });
    expect(() => configFrom('sim', ['--scenario', 'bare-metal-stuck', '--tls-ca-out', 'ca.pem'], {})).toThrow(
      /--tls-ca-out needs --tls/,
    );
    expect(() => configFrom('sim', ['--scenario', 'bare-metal-stuck', '--listen', 'nowhere'], {})).toThrow(
      /--listen "nowhere": expected HOST:PORT/,
    );
  });

  it('demo: the Omni version checked and without its v', () => {
    expect(configFrom('demo', ['--omni-version', 'v1.4.2', '-o', 'json'], {})).toEqual({
      omniVersion: '1.4.2',
      output: 'json',
      keep: false,
      logLevel: 'warn',
    });
    expect(() => configFrom('demo', ['--omni-version', 'soon'], {})).toThrow(/--omni-version "soon"/);
  });

  it('every command has a parse, and its table declares every flag it takes', () => {
    for (const [name, c] of Object.entries(COMMANDS)) {
      expect(typeof c.parse, name).toBe('function');
      for (const [flag, o] of Object.entries(c.options)) expect(o.describe, `${name} --${flag}`).toBeTruthy();
    }
  });
});
