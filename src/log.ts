// Logging: pino, JSON to stderr when not a TTY (containers), pino-pretty in-process on a TTY.
// Secrets are redacted by path at construction, so a careless `log.info({ key })` cannot leak them.

import pino from 'pino';
import pretty from 'pino-pretty';
import type { Logger } from 'pino';

export type { Logger };

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
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? 'info';
  const dest = opts.destination ?? process.stderr;
  const format = opts.format ?? ((dest as { isTTY?: boolean }).isTTY ? 'pretty' : 'json');
  const base = { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { name: 'stub-provider' } };
  if (format === 'pretty') {
    // pino-pretty as a stream in this process (no worker thread): simpler shutdown and flushing.
    return pino(base, prettyStream(dest));
  }
  // A real file descriptor gets pino's synchronous writer (nothing lost when the process exits at
  // once); any other stream (a test's, an embedding program's) is written to as given.
  const fd = (dest as { fd?: unknown }).fd;
  return typeof fd === 'number' ? pino(base, pino.destination({ dest: fd, sync: true })) : pino(base, dest);
}

function prettyStream(dest: NodeJS.WritableStream): NodeJS.WritableStream {
  return pretty({ destination: dest, colorize: true, sync: true, ignore: 'pid,hostname,name', translateTime: 'HH:MM:ss' });
}

/** A logger that drops everything (tests, library use). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
