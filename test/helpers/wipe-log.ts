// A pino logger whose NDJSON lines are kept in memory, so wipe tests can check what reached the log.

import { Writable } from 'node:stream';
import pino from 'pino';
import type { Logger } from 'pino';
import { REDACT_PATHS } from '../../src/log.js';

export interface CapturedLog {
  logger: Logger;
  /** Everything written so far, raw. */
  text(): string;
  /** The lines parsed as objects. */
  records(): Array<Record<string, unknown>>;
}

export function captureLog(): CapturedLog {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString('utf8'));
      cb();
    },
  });
  // The same redaction as the real logger, so a test sees what an operator would.
  const logger = pino({ level: 'debug', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, stream);
  const text = () => chunks.join('');
  return {
    logger,
    text,
    records: () =>
      text()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
