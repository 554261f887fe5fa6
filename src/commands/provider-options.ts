// The options `run` and `plan` share, their validation, and the connection both make: key,
// client, preflight. Every flag can also come from STUB_PROVIDER_<FLAG> (cli.ts binds the prefix).

import type { Argv, Options } from 'yargs';
import { DEFAULT_READ_LIMITS, createOmniClient, loadServiceAccountKey } from '../omni-client/index.js';
import type { OmniClient, WriteObserver } from '../omni-client/index.js';
import { UsageError } from '../exit-codes.js';
import { colorWanted, createLogger } from '../log.js';
import type { Logger, LogFormat } from '../log.js';
import { stateTypeProblem } from '../provider/profile.js';
import type { ProfileOption } from '../provider/profile.js';

/** What `--output` offers wherever a command prints a result. */
export const OUTPUT_FORMATS = ['text', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** `--output` as given (yargs checked the choice), text when absent. */
export function outputFormat(a: Args): OutputFormat {
  return OUTPUT_FORMATS.find((f) => f === a.output) ?? 'text';
}

export const connectionOptions = {
  id: { type: 'string', demandOption: true, describe: 'The provider ID, exactly as registered (case-sensitive; e.g. bare-metal, BareMetal-IAD1)', group: 'Provider:' },
  'omni-api-endpoint': { type: 'string', describe: 'Omni API endpoint, e.g. https://omni.example.com (env OMNI_ENDPOINT)', group: 'Omni:' },
  'service-account-key-file': { type: 'string', describe: 'File holding the provider\'s service account key (default: env OMNI_SERVICE_ACCOUNT_KEY, as printed by `omnictl infraprovider create <id>`)', group: 'Omni:' },
  'ca-file': { type: 'string', describe: 'PEM file of the CA that signed Omni\'s certificate', group: 'Omni:' },
  'insecure-skip-tls-verify': { type: 'boolean', default: false, describe: 'Do not verify Omni\'s TLS certificate (testing only)', group: 'Omni:' },
  machine: { type: 'string', array: true, default: [] as string[], describe: 'Release only this machine (InfraMachine ID = machine UUID, or MachineRequest ID); repeatable. Nothing else is written: no announcement, no refusals, no deregistration', group: 'Provider:' },
  profile: { type: 'string', choices: ['auto', 'bare-metal', 'provisioning'] as const, default: 'auto', describe: 'Provider kind: auto (from the static label, InfraMachines, MachineRequests), bare-metal, provisioning', group: 'Provider:' },
  'state-type': { type: 'string', array: true, default: [] as string[], describe: 'Extra resource type in infra-provider:<id> (a short name like Machine means Machine.<id>.infraprovider.sidero.dev); repeatable', group: 'Provider:' },
  concurrency: { type: 'number', default: 16, describe: 'Calls to Omni in flight at most', group: 'Run:' },
  'max-list-items': { type: 'number', default: DEFAULT_READ_LIMITS.listItems, describe: 'Items one List answer may hold at most; more is refused (exit 5, STUB_LIST_TOO_LONG). Raise it only for a fleet that large', group: 'Omni:' },
  output: { type: 'string', alias: 'o', choices: OUTPUT_FORMATS, default: 'text', describe: 'Result on stdout: text, json (the same JSON as --report) or yaml (the same, as YAML)', group: 'Output:' },
  report: { type: 'string', describe: 'Also write the JSON report to this file', group: 'Output:' },
  'log-level': { type: 'string', choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const, default: 'info', describe: 'Log level (logs go to stderr)', group: 'Output:' },
  'log-format': { type: 'string', choices: ['json', 'pretty'] as const, describe: 'Log format on stderr (default: pretty on a terminal, json otherwise)', group: 'Output:' },
} as const satisfies Record<string, Options>;

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
  maxListItems: number;
  output: OutputFormat;
  reportFile?: string;
  logLevel: string;
  logFormat?: LogFormat;
  /** `--color`/`--no-color`, else false when NO_COLOR is set; undefined: the logger decides (colour on a terminal). */
  color?: boolean;
}

export type Args = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const list = (v: unknown): string[] => (Array.isArray(v) ? v : v === undefined ? [] : [v]).flatMap((x) => String(x).split(/[\s,]+/)).filter((x) => x !== '');

/**
 * The options of `run` and `plan`, checked. `offline` (plan --from-dump): no endpoint is needed, and
 * none may be given on the command line, where it would suggest that Omni is asked.
 */
export function connectionConfig(a: Args, env: NodeJS.ProcessEnv = process.env, o: { offline?: boolean } = {}): ConnectionConfig {
  if (Array.isArray(a.id)) throw new UsageError(`--id is given ${a.id.length} times (${a.id.map(String).join(', ')}): give one provider ID`);
  const id = str(a.id);
  if (!id) throw new UsageError('--id is required: the provider ID, exactly as registered');
  if (/\s/.test(id)) throw new UsageError(`--id ${JSON.stringify(id)} contains white space`);
  if (o.offline && str(a['omni-api-endpoint'])) throw new UsageError('--from-dump plans from the dump alone: drop --omni-api-endpoint, or drop --from-dump to plan against that Omni');
  const endpoint = o.offline ? '' : str(a['omni-api-endpoint']) ?? str(env.OMNI_ENDPOINT);
  if (endpoint === undefined) throw new UsageError('no Omni endpoint: pass --omni-api-endpoint or set OMNI_ENDPOINT');
  const stateTypes = list(a['state-type']);
  for (const t of stateTypes) {
    const problem = stateTypeProblem(t, id);
    if (problem) throw new UsageError(problem);
  }
  const concurrency = Number(a.concurrency ?? 16);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024) throw new UsageError(`--concurrency must be an integer from 1 to 1024 (got ${String(a.concurrency)})`);
  const maxListItems = Number(a['max-list-items'] ?? DEFAULT_READ_LIMITS.listItems);
  if (!Number.isSafeInteger(maxListItems) || maxListItems < 1) throw new UsageError(`--max-list-items must be a whole number of at least 1 (got ${String(a['max-list-items'])})`);
  const fmt = str(a['log-format']);
  return {
    id,
    endpoint,
    ...(str(a['service-account-key-file']) ? { keyFile: str(a['service-account-key-file']) } : {}),
    ...(str(a['ca-file']) ? { caFile: str(a['ca-file']) } : {}),
    insecureSkipTlsVerify: a['insecure-skip-tls-verify'] === true,
    machines: [...new Set(list(a.machine))],
    profile: (str(a.profile) ?? 'auto') as ProfileOption,
    stateTypes,
    concurrency,
    maxListItems,
    output: outputFormat(a),
    ...(str(a.report) ? { reportFile: str(a.report) } : {}),
    logLevel: str(a['log-level']) ?? 'info',
    ...(fmt === 'json' || fmt === 'pretty' ? { logFormat: fmt } : {}),
    ...colorOption(a, env),
  };
}

/**
 * Colour: `--color` or `--no-color` (also STUB_PROVIDER_COLOR), else none when NO_COLOR is set to
 * anything but "" (no-color.org), else left to the logger (colour on a terminal only).
 */
export function colorOption(a: Args, env: NodeJS.ProcessEnv): { color?: boolean } {
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
}

export function loggerFor(c: Pick<ConnectionConfig, 'logLevel' | 'logFormat' | 'color'>, io: Pick<Io, 'stderr'>): Logger {
  return createLogger({ level: c.logLevel, ...(c.logFormat ? { format: c.logFormat } : {}), ...(c.color !== undefined ? { color: c.color } : {}), destination: io.stderr });
}

/** The client; `onWrite` hears of every write it sends (the audit log). */
export async function connect(c: ConnectionConfig, io: Io, logger: Logger, onWrite?: WriteObserver): Promise<OmniClient> {
  const key = await loadServiceAccountKey({ ...(c.keyFile ? { file: c.keyFile } : {}), env: io.env });
  return createOmniClient({
    endpoint: c.endpoint,
    key,
    ...(c.caFile ? { caFile: c.caFile } : {}),
    insecureSkipTlsVerify: c.insecureSkipTlsVerify,
    logger,
    connections: c.concurrency,
    limits: { listItems: c.maxListItems },
    ...(onWrite ? { onWrite } : {}),
  });
}

export function addExamples<T>(y: Argv<T>, examples: [string, string][]): Argv<T> {
  for (const [cmd, desc] of examples) y.example(cmd, desc);
  return y;
}

/**
 * `--machine` values that matched nothing: when none matched, the command line is wrong (a typo, the
 * wrong --id): exit 2 naming them. When some matched, the run goes on and the report lists the rest.
 */
export function checkMachinesMatched(c: Pick<ConnectionConfig, 'id' | 'machines'>, notFound: string[], logger: Logger, opts: { strict: boolean }): void {
  if (c.machines.length === 0 || notFound.length === 0) return;
  const names = notFound.join(', ');
  // `plan` is a rehearsal: a value that matches nothing is most likely a typo, so say so with exit 2.
  // `run` must stay repeatable (a re-run after the machine was released finds nothing and exits 0,
  // design rule 4): there the values are reported under "not found" and logged as a warning.
  if (opts.strict && notFound.length === c.machines.length) {
    throw new UsageError(`--machine ${names}: no InfraMachine (machine UUID) or MachineRequest of provider ${c.id} has ${notFound.length > 1 ? 'these IDs' : 'this ID'}; check the IDs and --id (case-sensitive)`);
  }
  logger.warn({ notFound }, `--machine values that match nothing of provider ${c.id} (already released, or mistyped): ${names}`);
}
