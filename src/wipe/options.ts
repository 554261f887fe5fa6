// The wipe flags (a yargs option table, spread into run's) and their validation (wipeOptionsFrom,
// called by run's parse).

import type { InferredOptionTypes, Options } from 'yargs';
import { UsageError } from '../exit-codes.js';
import { CommandSyntaxError, splitCommand } from './argv.js';
import { WIPE_STRATEGIES, type WipeOptions, type WipeResult } from './types.js';

export const DEFAULT_WIPE_TIMEOUT_S = 30;
export const DEFAULT_WIPE_CONCURRENCY = 4;
const MAX_WIPE_TIMEOUT_S = 3600;

export const wipeCliOptions = {
  wipe: {
    type: 'string',
    choices: WIPE_STRATEGIES,
    default: 'none',
    group: 'Wipe:',
    describe:
      'What to do to each machine before it is released (best effort; none of these erases disks): none, command ' +
      '(run --wipe-command), ' +
      'redfish-power-off, redfish-pxe-reboot, ipmi-power-off, ipmi-pxe-reboot',
  },
  'wipe-command': {
    type: 'string',
    group: 'Wipe:',
    describe:
      'With --wipe command: "<program> [args]", run per machine without a shell; its environment is PATH plus ' +
      'STUB_MACHINE_ID, ' +
      ('STUB_PROVIDER_ID, STUB_BMC_ADDRESS, STUB_BMC_PORT, STUB_BMC_USERNAME, STUB_BMC_PASSWORD (where known); exit ' +
        '0 ' +
        '= success'),
  },
  'wipe-timeout': {
    type: 'string',
    default: `${DEFAULT_WIPE_TIMEOUT_S}s`,
    group: 'Wipe:',
    describe:
      'How long a wipe of one machine may take (e.g. 30s, 2m; a bare number is seconds; at most 1h); then it is ' +
      'abandoned (a command is killed)',
  },
  'wipe-concurrency': {
    type: 'number',
    default: DEFAULT_WIPE_CONCURRENCY,
    group: 'Wipe:',
    describe: 'How many machines are wiped at the same time',
  },
  'require-wipe': {
    type: 'boolean',
    default: false,
    group: 'Wipe:',
    describe: 'Release a machine only when its wipe succeeded; otherwise report it blocked and keep its finalizers',
  },
  'redfish-port': {
    type: 'number',
    default: 443,
    group: 'Wipe:',
    describe: 'Port of the Redfish service on the BMC address',
  },
  'redfish-scheme': {
    type: 'string',
    choices: ['https', 'http'] as const,
    default: 'https',
    group: 'Wipe:',
    describe: 'Scheme of the Redfish service (http only for BMCs on a trusted network)',
  },
  'bmc-insecure-skip-tls-verify': {
    type: 'boolean',
    default: false,
    group: 'Wipe:',
    describe: "Accept a BMC's self-signed or otherwise unverifiable Redfish certificate",
  },
  'ipmi-interface': {
    type: 'string',
    choices: ['lanplus', 'lan'] as const,
    default: 'lanplus',
    group: 'Wipe:',
    describe: 'ipmitool interface: lanplus (IPMI 2.0) or lan (IPMI 1.5)',
  },
  'ipmi-cipher-suite': {
    type: 'number',
    default: 3,
    group: 'Wipe:',
    describe: 'IPMI 2.0 cipher suite for lanplus (ipmitool -C); BMCs commonly accept 3 or 17',
  },
} as const satisfies Record<string, Options>;

/** The wipe flags as yargs parsed them (the types their table declares; yargs checked the choices). */
export type WipeFlags = InferredOptionTypes<typeof wipeCliOptions>;

/**
 * The wipe flags, checked: a UsageError names a value or a combination that cannot be used.
 * `duration` reads `--wipe-timeout` as the CLI reads every duration flag (commands/durations.ts).
 */
export function wipeOptionsFrom(a: WipeFlags, duration: (value: string, flag: string) => number): WipeOptions {
  const strategy = a.wipe;
  const command = a['wipe-command'];
  if (strategy === 'command') {
    if (!command || !command.trim()) throw new UsageError('--wipe command needs --wipe-command "<program> [args]"');
    try {
      splitCommand(command);
    } catch (err) {
      if (err instanceof CommandSyntaxError) throw new UsageError(`--wipe-command: ${err.message}`);
      throw err;
    }
  } else if (command !== undefined) {
    throw new UsageError(`--wipe-command is only used with --wipe command (got --wipe ${strategy})`);
  }
  const requireWipe = a['require-wipe'];
  if (requireWipe && strategy === 'none') {
    throw new UsageError('--require-wipe with --wipe none would block every machine: choose a wipe strategy');
  }
  const timeoutMs = duration(a['wipe-timeout'], '--wipe-timeout');
  if (timeoutMs > MAX_WIPE_TIMEOUT_S * 1000)
    throw new UsageError(`--wipe-timeout must be at most ${MAX_WIPE_TIMEOUT_S / 3600}h (got ${a['wipe-timeout']})`);
  const opts: WipeOptions = {
    strategy,
    timeoutMs,
    requireWipe,
    concurrency: integerFlag('wipe-concurrency', a['wipe-concurrency'], 1, 256),
    redfishPort: integerFlag('redfish-port', a['redfish-port'], 1, 65535),
    redfishScheme: a['redfish-scheme'],
    bmcInsecureSkipTlsVerify: a['bmc-insecure-skip-tls-verify'],
    ipmiInterface: a['ipmi-interface'],
    ipmiCipherSuite: integerFlag('ipmi-cipher-suite', a['ipmi-cipher-suite'], 0, 17),
  };
  if (strategy === 'command' && command) opts.command = command;
  return opts;
}

/** With --require-wipe, only a machine whose wipe succeeded may be released. */
export function wipeBlocksRelease(result: WipeResult, opts: Pick<WipeOptions, 'requireWipe'>): boolean {
  return opts.requireWipe && result.outcome !== 'succeeded';
}

function numberFlag(name: string, n: number): number {
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number (got ${n})`);
  return n;
}

function integerFlag(name: string, v: number, min: number, max: number): number {
  const n = numberFlag(name, v);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max} (got ${n})`);
  return n;
}
