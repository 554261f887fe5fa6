// Reading answer bodies within limits (docs/design.md rule 12): a unary body and what it inflates to are
// capped and refused while they arrive, never after they were buffered whole (a stream's lines:
// ndjson.ts); bytes must be UTF-8 (decoded strictly: a replaced byte would turn one ID into another)
// and JSON. Problems are WireErrors with a stable code; the transport names the call and the endpoint.

import { isUtf8 } from 'node:buffer';
import type { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import type { Dispatcher } from 'undici';
import { escapeControl } from '../../omni-api/untrusted.js';
import { WireError } from '../../omni-api/wire.js';

const MiB = 1024 * 1024;

export interface ReadLimits {
  /** One unary answer body: the bytes received, and what they inflate to, each at most this. */
  answerBytes: number;
  /** One line of a List or Watch stream after inflating; also the compressed bytes received since the last line. */
  lineBytes: number;
  /** Items of one List. */
  listItems: number;
  /** Bytes held by all answers being read at once (received, not yet decoded). */
  bufferedBytes: number;
}

/**
 * Omni caps its gRPC messages at 32 MiB; the gateway's JSON of one (base64 specs, a YAML rendering
 * beside them) is larger than the protobuf, hence twice that per answer and per line. Real answers are
 * kilobytes. 250 000 List items: 2.5 per machine at 100 000 machines (the Machines List holds every
 * machine of the Omni, not only the provider's). Two answers at their cap may be read at once; the
 * sum is what keeps 16 (or 1024) concurrent calls from holding one cap each.
 */
export const DEFAULT_READ_LIMITS: Readonly<ReadLimits> = {
  answerBytes: 64 * MiB,
  lineBytes: 64 * MiB,
  listItems: 250_000,
  bufferedBytes: 128 * MiB,
};

export function describeBytes(n: number): string {
  return n >= MiB && n % MiB === 0 ? `${n / MiB} MiB` : n >= 1024 && n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
}

/** What all reads of one transport hold at once (see ReadLimits.bufferedBytes). */
export class ReadBudget {
  #held = 0;
  constructor(readonly max: number) {}

  take(n: number): void {
    if (this.#held + n > this.max) {
      throw new WireError(
        `the answers being read at once from Omni would hold more than ${describeBytes(this.max)}`,
        'STUB_ANSWER_TOO_LARGE',
      );
    }
    this.#held += n;
  }

  give(n: number): void {
    this.#held -= n;
  }

  get held(): number {
    return this.#held;
  }
}

export type Encoding = 'identity' | 'gzip';

/** The answer's Content-Encoding; anything but none, `identity` or `gzip` (all we ask for) is refused. */
export function encodingOf(header: string | string[] | undefined): Encoding {
  const v = (Array.isArray(header) ? header.join(',') : (header ?? '')).trim().toLowerCase();
  if (v === '' || v === 'identity') return 'identity';
  if (v === 'gzip') return 'gzip';
  throw new WireError(
    `an answer with Content-Encoding ${JSON.stringify(escapeControl(v.slice(0, 64)))}, which was not asked for`,
  );
}

/** The answer's Content-Encoding; one that was not asked for ends the exchange (the body is dropped). */
export function encodingOfAnswer(res: Dispatcher.ResponseData): Encoding {
  try {
    return encodingOf(res.headers['content-encoding']);
  } catch (e) {
    discard(res.body);
    throw e;
  }
}

/** Stops reading an answer: the connection is dropped, and the abort that causes is nobody's error. */
export function discard(body: Readable): void {
  body.on('error', () => {
    // undici reports its own abort of a body destroyed without a reason; nothing waits for it
  });
  body.destroy();
}

function answerTooLarge(limit: number, inflated: boolean): WireError {
  return new WireError(
    `the answer ${inflated ? 'inflates to' : 'is'} more than ${describeBytes(limit)}`,
    'STUB_ANSWER_TOO_LARGE',
  );
}

/**
 * A whole unary body, inflated: at most `limits.answerBytes` received (a larger Content-Length is
 * refused before reading) and at most that much inflated (zlib stops at the cap). The bytes received
 * count against `budget` until the body is decoded.
 */
export async function readBody(
  body: Readable,
  encoding: Encoding,
  contentLength: string | string[] | undefined,
  limits: ReadLimits,
  budget: ReadBudget,
): Promise<Buffer> {
  const cap = limits.answerBytes;
  const declared = typeof contentLength === 'string' ? Number(contentLength) : NaN;
  if (declared > cap) {
    discard(body);
    throw answerTooLarge(cap, false);
  }
  let held = 0;
  try {
    const raw = await collect(body, cap, (n) => {
      budget.take(n);
      held += n;
    });
    if (encoding === 'identity') return raw;
    // A whole (small) body: one-shot gunzip costs a fifth of a Gunzip stream per response, which at
    // thousands of calls was most of the client's CPU. `maxOutputLength` stops inflating at the cap
    // (a few MB of gzip can inflate to gigabytes). A truncated body fails with Z_BUF_ERROR, retried.
    try {
      return gunzipSync(raw, { maxOutputLength: cap });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ERR_BUFFER_TOO_LARGE') throw answerTooLarge(cap, true);
      if (code === 'Z_DATA_ERROR') throw new WireError('a gzip answer that does not inflate (corrupt data)');
      throw e;
    }
  } finally {
    budget.give(held);
  }
}

/** A unary answer's body (or an error body), within the read limits. */
export function readAnswer(res: Dispatcher.ResponseData, limits: ReadLimits, budget: ReadBudget): Promise<Buffer> {
  return readBody(res.body, encodingOfAnswer(res), res.headers['content-length'], limits, budget);
}

/** The chunks of `body` up to its end; more than `cap` bytes destroys it and fails. */
function collect(body: Readable, cap: number, take: (n: number) => void): Promise<Buffer> {
  // Listeners, not `for await`: an async iterator per body costs more than the body itself at
  // thousands of small answers per second.
  return new Promise<Buffer>((resolve, reject) => {
    if (body.destroyed) return reject(body.errored ?? new Error('the answer was closed before it was read'));
    const chunks: Buffer[] = [];
    let n = 0;
    const fail = (e: unknown): void => {
      body.off('data', onData);
      discard(body);
      reject(e);
    };
    const onData = (c: Buffer): void => {
      n += c.length;
      if (n > cap) return fail(answerTooLarge(cap, false));
      try {
        take(c.length);
      } catch (e) {
        return fail(e);
      }
      chunks.push(c);
    };
    let ended = false;
    body.on('data', onData);
    body.once('end', () => {
      ended = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, n));
    });
    body.once('error', reject);
    // Destroyed without an error (and without an end): never leave the caller waiting. (An Error is
    // made only then: its stack trace costs more than the rest of a small answer's reading.)
    body.once('close', () => {
      if (!ended) reject(new Error('the answer was closed before its end'));
    });
  });
}

/** A body that must be one JSON value, decoded strictly as UTF-8. */
export function parseJson(buf: Buffer, what: string): unknown {
  if (!isUtf8(buf)) throw new WireError(`${what} that is not valid UTF-8: ${snippet(buf)}`);
  return parseJsonText(buf.toString('utf8'), what);
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * One JSON value whose strings are all valid Unicode. Bytes were checked to be UTF-8, but a `\ud800`
 * escape makes a lone surrogate all the same: Omni (Go) would read it as U+FFFD, so an ID or a
 * finalizer holding one names something else once sent back. Omni never writes such escapes, so the
 * walk over the value runs only when the text has one.
 */
export function parseJsonText(text: string, what: string): unknown {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new WireError(`${what} that is not JSON: ${snippet(text)}`);
  }
  if (text.includes('\\u') && SURROGATE_ESCAPE.test(text) && hasLoneSurrogate(v)) {
    throw new WireError(`${what} with a string that is not valid Unicode (a lone surrogate): ${snippet(text)}`);
  }
  return v;
}

function hasLoneSurrogate(v: unknown): boolean {
  if (typeof v === 'string') return LONE_SURROGATE.test(v);
  if (Array.isArray(v)) return v.some(hasLoneSurrogate);
  if (typeof v === 'object' && v !== null)
    return Object.entries(v).some(([k, x]) => LONE_SURROGATE.test(k) || hasLoneSurrogate(x));
  return false;
}

/** A short, escaped rendering of untrusted bytes for an error message (lenient: display only). */
export function snippet(buf: Buffer | string, max = 200): string {
  const s = typeof buf === 'string' ? buf.slice(0, max * 4) : buf.subarray(0, max * 4).toString('utf8');
  const t = s.trim().replace(/\s+/g, ' ');
  if (t === '') return '(empty)';
  return escapeControl(t.length > max ? `${t.slice(0, max)}...` : t);
}
