// Logging: pino, JSON to stderr when not a TTY (containers: level names, ISO 8601 times),
// pino-pretty in-process on a TTY.
// Secrets are redacted by path at construction, so a careless `log.info({ key })` cannot leak them,
// and by value in every line written (redact.ts: a key or a password quoted in a message).
// Log lines carry what Omni, a BMC or a command said (IDs, error messages, output): design rule 13 is
// applied here, once for every line, just before it is written (pino's streamWrite hook).
// Pretty lines are one line per entry (pino-pretty's singleLine): a person scrolls past fewer lines,
// and the progress line (commands/progress.ts) stays readable below them. Colour unless NO_COLOR.

import { createRequire } from 'node:module';
import pino from 'pino';
import type { Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import { escapeControl, escapeControlIn, inertJson } from './omni-api/untrusted.js';
import { redact, redactDeep } from './redact.js';

export type LogFormat = 'json' | 'pretty';

/** Paths that may hold a secret, wherever they appear in a log object. */
export const REDACT_PATHS = [
  'key',
  'serviceAccountKey',
  'pgp_key',
  'password',
  'bmcPassword',
  'headers["grpc-metadata-x-sidero-signature"]',
  '*.key',
  '*.serviceAccountKey',
  '*.pgp_key',
  '*.password',
  '*.bmcPassword',
  '*.env.STUB_BMC_PASSWORD',
  '*.env.IPMI_PASSWORD',
  '*.env.OMNI_SERVICE_ACCOUNT_KEY',
];

export interface LoggerOptions {
  level?: string;
  format?: LogFormat;
  /** Where to write; stderr by default (stdout is for results). */
  destination?: NodeJS.WritableStream;
  /** Colours in pretty lines; default: unless NO_COLOR is set (colorWanted). JSON never has any. */
  color?: boolean;
}

/**
 * Whether a person asked for no colour: NO_COLOR set to anything but the empty string
 * (https://no-color.org). The CLI's --no-color lands in ConnectionConfig.color and wins over this.
 */
export function colorWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.NO_COLOR ?? '') === '';
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? 'info';
  const dest = opts.destination ?? process.stderr;
  const format = opts.format ?? ((dest as { isTTY?: boolean }).isTTY ? 'pretty' : 'json');
  const base = { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { name: 'stub-provider' } };
  if (format === 'pretty') {
    // pino-pretty as a stream in this process (no worker thread): simpler shutdown and flushing.
    return pino({ ...base, hooks: { streamWrite: escapeForPretty } }, prettyStream(dest, opts.color ?? colorWanted()));
  }
  // JSON stays JSON for the programs that read it; what a terminal would act on is \uXXXX in it.
  // Level names and ISO 8601 times, as log collectors and people reading `kubectl logs` expect them.
  const json = {
    ...base,
    hooks: { streamWrite: (line: string) => inertJson(redact(line)) },
    formatters: { level: (label: string) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  // A real file descriptor gets pino's synchronous writer (nothing lost when the process exits at
  // once); any other stream (a test's, an embedding program's) is written to as given.
  const fd = (dest as { fd?: unknown }).fd;
  return typeof fd === 'number' ? pino(json, pino.destination({ dest: fd, sync: true })) : pino(json, dest);
}

/**
 * pino-pretty prints the message as it is and the other values JSON-quoted (which escapes C0 but
 * not C1 or bidi controls), so every string of the line, keys included, is escaped before it parses
 * the line. A value holding a control character therefore shows its escape with a doubled backslash.
 */
function escapeForPretty(line: string): string {
  try {
    return `${JSON.stringify(escapeControlIn(redactDeep(JSON.parse(line) as unknown)))}\n`;
  } catch {
    return `${escapeControl(redact(line.trimEnd()))}\n`;
  }
}

/**
 * pino-pretty, loaded the first time a pretty logger is made: JSON logs (a Job's, a container's, a
 * program's) never load it (~20 ms of CPU at start-up, with its dependencies).
 */
const loadPretty = (): typeof PinoPretty => createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;

function prettyStream(dest: NodeJS.WritableStream, color: boolean): NodeJS.WritableStream {
  return loadPretty()({
    destination: dest,
    colorize: color,
    singleLine: true,
    sync: true,
    ignore: 'pid,hostname,name',
    translateTime: 'HH:MM:ss',
  });
}

/** A logger that drops everything (tests, library use). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
