// The options `run` and `plan` share: their table, their configuration (ConnectionConfig, parsed
// once by each command's parse), where the result of every exit goes (ResultTarget), and the
// connection both make: key, client. Every flag can also come from STUB_PROVIDER_<FLAG> (cli-args.ts).

import { DEFAULT_READ_LIMITS } from '../omni-client/transport/body.js';
import { createOmniClient } from '../omni-client/client.js';
import { loadServiceAccountKey } from '../omni-client/transport/auth.js';
import { addSecret } from '../redact.js';
import type { OmniClient } from '../omni-client/client.js';
import type { WriteObserver } from '../omni-client/write/observer.js';
import { UsageError } from '../exit-codes.js';
import { colorWanted, createLogger } from '../log.js';
import type { Logger } from 'pino';
import type { LogFormat } from '../log.js';
import { stateTypeProblem } from '../provider/profile.js';
import type { ProfileOption } from '../provider/profile.js';
import { parseDuration } from './durations.js';
import { nonEmpty } from './options.js';
import type { Flags, Given, OptionTable } from './options.js';

/** What `--output` offers wherever a command prints a result. */
export const OUTPUT_FORMATS = ['text', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export const connectionOptions = {
  id: {
    type: 'string',
    demandOption: true,
    describe: 'The provider ID, exactly as registered (case-sensitive; e.g. bare-metal, BareMetal-IAD1)',
    group: 'Provider:',
  },
  'omni-api-endpoint': {
    type: 'string',
    describe: 'Omni API endpoint, e.g. https://omni.example.com (env OMNI_ENDPOINT)',
    group: 'Omni:',
  },
  'service-account-key-file': {
    type: 'string',
    describe:
      "File holding the provider's service account key (default: env OMNI_SERVICE_ACCOUNT_KEY, as printed by " +
      "`omnictl infraprovider create <id>`; SIDERO_SERVICE_ACCOUNT_KEY, when set, comes first, as in Omni's own " +
      'library)',
    group: 'Omni:',
  },
  'ca-file': { type: 'string', describe: "PEM file of the CA that signed Omni's certificate", group: 'Omni:' },
  'insecure-skip-tls-verify': {
    type: 'boolean',
    default: false,
    describe: "Do not verify Omni's TLS certificate (testing only)",
    group: 'Omni:',
  },
  machine: {
    type: 'string',
    array: true,
    default: [] as string[],
    describe:
      'Release only this machine (InfraMachine ID = machine UUID, or MachineRequest ID); repeatable. Nothing else is ' +
      'written: no announcement, no refusals, no deregistration',
    group: 'Provider:',
  },
  profile: {
    type: 'string',
    choices: ['auto', 'bare-metal', 'provisioning'] as const,
    default: 'auto',
    describe: 'Provider kind: auto (from the static label, InfraMachines, MachineRequests), bare-metal, provisioning',
    group: 'Provider:',
  },
  'state-type': {
    type: 'string',
    array: true,
    default: [] as string[],
    describe:
      'Extra resource type in infra-provider:<id> (a short name like Machine means ' +
      'Machine.<id>.infraprovider.sidero.dev); repeatable',
    group: 'Provider:',
  },
  concurrency: { type: 'number', default: 16, describe: 'Calls to Omni in flight at most', group: 'Run:' },
  'stream-idle-timeout': {
    type: 'string',
    default: '30s',
    describe:
      'How long a List (or the opening of a Watch) may go without receiving anything before it fails ' +
      '(STUB_STREAM_STALLED); a slow one that keeps delivering is not cut (e.g. 30s, 2m)',
    group: 'Omni:',
  },
  'max-list-items': {
    type: 'number',
    default: DEFAULT_READ_LIMITS.listItems,
    describe:
      'Items one List answer may hold at most; more is refused (exit 5, STUB_LIST_TOO_LONG). Raise it only for a ' +
      'fleet that large',
    group: 'Omni:',
  },
  output: {
    type: 'string',
    alias: 'o',
    choices: OUTPUT_FORMATS,
    default: 'text',
    describe: 'Result on stdout: text, json (the same JSON as --report) or yaml (the same, as YAML)',
    group: 'Output:',
  },
  report: { type: 'string', describe: 'Also write the JSON report to this file', group: 'Output:' },
  'log-level': {
    type: 'string',
    choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const,
    default: 'info',
    describe: 'Log level (logs go to stderr)',
    group: 'Output:',
  },
  'log-format': {
    type: 'string',
    choices: ['json', 'pretty'] as const,
    describe: 'Log format on stderr (default: pretty on a terminal, json otherwise)',
    group: 'Output:',
  },
} as const satisfies OptionTable;

/** The flags of `run` and `plan` that say where the result of every exit goes (resultTarget). */
type TargetFlags = Pick<
  Given<typeof connectionOptions>,
  'id' | 'output' | 'report' | 'service-account-key-file' | 'ca-file'
> & {
  'audit-log'?: string | string[] | undefined;
  'from-dump'?: string | string[] | undefined;
};

/**
 * Where the result of every exit of `run` and `plan` goes (run-io.ts): known as soon as yargs has
 * parsed, before any value is checked, so that a usage error found by the command's parse has its
 * result too. A flag given twice counts as not given here (the parse refuses it).
 */
export interface ResultTarget {
  /** `--id` as given, for the result of an exit before it was checked. */
  providerId?: string;
  output: OutputFormat;
  reportFile?: string;
  auditLog?: string;
  /** Files an output must not be (it would overwrite them): the key file, the CA file, a dump. */
  inputs: { flag: string; path: string | undefined }[];
}

export function resultTarget(a: TargetFlags): ResultTarget {
  const providerId = nonEmpty(a.id);
  const reportFile = nonEmpty(a.report);
  const auditLog = nonEmpty(a['audit-log']);
  return {
    ...(providerId ? { providerId } : {}),
    output: OUTPUT_FORMATS.find((f) => f === a.output) ?? 'text',
    ...(reportFile ? { reportFile } : {}),
    ...(auditLog ? { auditLog } : {}),
    inputs: (['service-account-key-file', 'ca-file', 'from-dump'] as const).map((f) => ({
      flag: `--${f}`,
      path: nonEmpty(a[f]),
    })),
  };
}

export interface ConnectionConfig {
  id: string;
  endpoint: string;
  keyFile?: string;
  caFile?: string;
  insecureSkipTlsVerify: boolean;
  machines: string[];
  profile: ProfileOption;
  stateTypes: string[];
  concurrency: number;
  /** `--stream-idle-timeout`: how long a List may go without receiving anything. */
  streamIdleMs: number;
  maxListItems: number;
  logLevel: LogLevel;
  logFormat?: LogFormat;
  /** `--color`/`--no-color`, else false when NO_COLOR is set; undefined: the logger decides (colour on a terminal). */
  color?: boolean;
  /** Where the result goes: stdout's format, the report file, the audit log. */
  target: ResultTarget;
}

export type LogLevel = Flags<typeof connectionOptions>['log-level'];

/** A repeatable flag's values, also comma or space separated (`--machine a,b`). */
const list = (v: readonly string[]): string[] => v.flatMap((x) => x.split(/[\s,]+/)).filter((x) => x !== '');

/**
 * The options of `run` and `plan`, checked. `offline` (plan --from-dump): no endpoint is needed, and
 * none may be given on the command line, where it would suggest that Omni is asked.
 */
export function connectionConfig(
  a: Flags<typeof connectionOptions> & TargetFlags,
  env: NodeJS.ProcessEnv,
  o: { offline?: boolean } = {},
): ConnectionConfig {
  const id = nonEmpty(a.id);
  if (!id) throw new UsageError('--id is required: the provider ID, exactly as registered');
  if (/\s/.test(id)) throw new UsageError(`--id ${JSON.stringify(id)} contains white space`);
  if (o.offline && nonEmpty(a['omni-api-endpoint']))
    throw new UsageError(
      '--from-dump plans from the dump alone: drop --omni-api-endpoint, or drop --from-dump to plan against that Omni',
    );
  const endpoint = o.offline ? '' : (nonEmpty(a['omni-api-endpoint']) ?? nonEmpty(env.OMNI_ENDPOINT));
  if (endpoint === undefined) throw new UsageError('no Omni endpoint: pass --omni-api-endpoint or set OMNI_ENDPOINT');
  const stateTypes = list(a['state-type']);
  for (const t of stateTypes) {
    const problem = stateTypeProblem(t, id);
    if (problem) throw new UsageError(problem);
  }
  const concurrency = a.concurrency;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024)
    throw new UsageError(`--concurrency must be an integer from 1 to 1024 (got ${concurrency})`);
  const maxListItems = a['max-list-items'];
  if (!Number.isSafeInteger(maxListItems) || maxListItems < 1)
    throw new UsageError(`--max-list-items must be a whole number of at least 1 (got ${maxListItems})`);
  const keyFile = nonEmpty(a['service-account-key-file']);
  const caFile = nonEmpty(a['ca-file']);
  return {
    id,
    endpoint,
    ...(keyFile ? { keyFile } : {}),
    ...(caFile ? { caFile } : {}),
    insecureSkipTlsVerify: a['insecure-skip-tls-verify'],
    machines: [...new Set(list(a.machine))],
    profile: a.profile,
    stateTypes,
    concurrency,
    streamIdleMs: parseDuration(a['stream-idle-timeout'], '--stream-idle-timeout'),
    maxListItems,
    logLevel: a['log-level'],
    ...(a['log-format'] ? { logFormat: a['log-format'] } : {}),
    ...colorOption(a, env),
    target: resultTarget(a),
  };
}

/**
 * Colour: `--color` or `--no-color` (also STUB_PROVIDER_COLOR), else none when NO_COLOR is set to
 * anything but "" (no-color.org), else left to the logger (colour on a terminal only).
 */
export function colorOption(a: { color?: boolean | undefined }, env: NodeJS.ProcessEnv): { color?: boolean } {
  if (typeof a.color === 'boolean') return { color: a.color };
  return colorWanted(env) ? {} : { color: false };
}

export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  stdinIsTTY: boolean;
  env: NodeJS.ProcessEnv;
  /** Asks a yes/no question on the terminal. */
  ask?: (question: string) => Promise<boolean>;
  /** Where SIGINT/SIGTERM are listened to (the process by default). */
  signals?: NodeJS.EventEmitter;
  /** The signal that came before the command listened (early-signal.ts), taken once. */
  takeEarlySignal?: () => 'SIGINT' | 'SIGTERM' | undefined;
}

export function loggerFor(
  c: Pick<ConnectionConfig, 'logLevel' | 'logFormat' | 'color'>,
  io: Pick<Io, 'stderr'>,
): Logger {
  return createLogger({
    level: c.logLevel,
    ...(c.logFormat ? { format: c.logFormat } : {}),
    ...(c.color !== undefined ? { color: c.color } : {}),
    destination: io.stderr,
  });
}

/**
 * The client; `onWrite` hears of every write it sends (the audit log); `backPressure`: how long a throttled write is
 * retried.
 */
export async function connect(
  c: ConnectionConfig,
  io: Io,
  logger: Logger,
  onWrite?: WriteObserver,
  backPressure?: { maxWaitMs: number },
): Promise<OmniClient> {
  const key = await loadServiceAccountKey({
    ...(c.keyFile ? { file: c.keyFile } : {}),
    env: io.env,
    onSecret: addSecret,
  });
  return createOmniClient({
    endpoint: c.endpoint,
    key,
    ...(c.caFile ? { caFile: c.caFile } : {}),
    insecureSkipTlsVerify: c.insecureSkipTlsVerify,
    logger,
    // The one limit on calls in flight; writes adapt to back-pressure below it (omni-client/client.ts).
    concurrency: c.concurrency,
    streamIdleMs: c.streamIdleMs,
    limits: { listItems: c.maxListItems },
    ...(backPressure ? { backPressure } : {}),
    ...(onWrite ? { onWrite } : {}),
  });
}

/**
 * `--machine` values that matched nothing: when none matched, the command line is wrong (a typo, the
 * wrong --id): exit 2 naming them. When some matched, the run goes on and the report lists the rest.
 */
export function checkMachinesMatched(
  c: Pick<ConnectionConfig, 'id' | 'machines'>,
  notFound: string[],
  logger: Logger,
  opts: { strict: boolean },
): void {
  if (c.machines.length === 0 || notFound.length === 0) return;
  const names = notFound.join(', ');
  // `plan` is a rehearsal: a value that matches nothing is most likely a typo, so say so with exit 2.
  // `run` must stay repeatable (a re-run after the machine was released finds nothing and exits 0,
  // design rule 4): there the values are reported under "not found" and logged as a warning.
  if (opts.strict && notFound.length === c.machines.length) {
    throw new UsageError(
      `--machine ${names}: no InfraMachine (machine UUID) or MachineRequest of provider ${c.id} has ` +
        `${notFound.length > 1 ? 'these IDs' : 'this ID'}; check the IDs and --id (case-sensitive)`,
    );
  }
  logger.warn(
    { notFound },
    `--machine values that match nothing of provider ${c.id} (already released, or mistyped): ${names}`,
  );
}
