// Reading answer bodies within limits (design.md rule 12): a unary body, one line of a stream, and
// what either inflates to are capped and refused while they arrive, never after they were buffered
// whole; bytes must be UTF-8 (decoded strictly: a replaced byte would turn one ID into another) and
// JSON. Problems are WireErrors with a stable code; the transport names the call and the endpoint.

import { isUtf8 } from 'node:buffer';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip, gunzipSync } from 'node:zlib';
import { escapeControl } from '../untrusted.js';
import { WireError } from './wire.js';

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
      throw new WireError(`the answers being read at once from Omni would hold more than ${describeBytes(this.max)}`, 'STUB_ANSWER_TOO_LARGE');
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
  throw new WireError(`an answer with Content-Encoding ${JSON.stringify(escapeControl(v.slice(0, 64)))}, which was not asked for`);
}

/** Stops reading an answer: the connection is dropped, and the abort that causes is nobody's error. */
export function discard(body: Readable): void {
  body.on('error', () => {
    // undici reports its own abort of a body destroyed without a reason; nothing waits for it
  });
  body.destroy();
}

function answerTooLarge(limit: number, inflated: boolean): WireError {
  return new WireError(`the answer ${inflated ? 'inflates to' : 'is'} more than ${describeBytes(limit)}`, 'STUB_ANSWER_TOO_LARGE');
}

/**
 * A whole unary body, inflated: at most `limits.answerBytes` received (a larger Content-Length is
 * refused before reading) and at most that much inflated (zlib stops at the cap). The bytes received
 * count against `budget` until the body is decoded.
 */
export async function readBody(body: Readable, encoding: Encoding, contentLength: string | string[] | undefined, limits: ReadLimits, budget: ReadBudget): Promise<Buffer> {
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
  if (typeof v === 'object' && v !== null) return Object.entries(v).some(([k, x]) => LONE_SURROGATE.test(k) || hasLoneSurrogate(x));
  return false;
}

/** A short, escaped rendering of untrusted bytes for an error message (lenient: display only). */
export function snippet(buf: Buffer | string, max = 200): string {
  const s = typeof buf === 'string' ? buf.slice(0, max * 4) : buf.subarray(0, max * 4).toString('utf8');
  const t = s.trim().replace(/\s+/g, ' ');
  if (t === '') return '(empty)';
  return escapeControl(t.length > max ? `${t.slice(0, max)}...` : t);
}

/** The compressed bytes received since the last complete line of a gzip stream. */
export interface CompressedMeter {
  sinceLine: number;
}

/**
 * The decoded byte stream of a List or Watch answer. Omni flushes a gzip sync block per stream line:
 * decoded as bytes arrive, not at the end. The compressed bytes received since the last line are
 * counted (`meter.sinceLine`), so a gzip stream that inflates to nothing cannot run forever either.
 */
export function streamOf(body: Readable, encoding: Encoding, limits: ReadLimits): { src: Readable; meter?: CompressedMeter } {
  if (encoding === 'identity') return { src: body };
  const cap = limits.lineBytes;
  const meter: CompressedMeter = { sinceLine: 0 };
  const gunzip = createGunzip();
  // A listener beside the pipe, not a Transform stage: a sixth of the cost per List item.
  body.on('data', (c: Buffer) => {
    meter.sinceLine += c.length;
    if (meter.sinceLine > cap && !gunzip.destroyed) gunzip.destroy(lineTooLong(cap, 'compressed'));
  });
  const src = pipeline(body, gunzip, () => {
    // errors surface to the reader of the gunzip stream
  });
  return { src, meter };
}

function lineTooLong(cap: number, how: 'compressed' | 'inflated'): WireError {
  return new WireError(`a stream line of more than ${describeBytes(cap)}${how === 'compressed' ? ' of compressed data' : ''}`, 'STUB_LINE_TOO_LONG');
}

export interface LineOptions {
  /** Bytes of one line at most (default DEFAULT_READ_LIMITS.lineBytes). */
  maxLineBytes?: number;
  /** Where the bytes of an incomplete line are counted while it is buffered. */
  budget?: ReadBudget;
  /** Told of every line (the compressed meter starts counting again). */
  meter?: CompressedMeter | undefined;
}

/**
 * Splits a byte stream into lines, whatever the chunking (multi-byte characters included). Each line
 * is checked to be UTF-8 (strictly) and at most `maxLineBytes` long, counted while it arrives; blank
 * lines are skipped and a last line without a newline is kept. Nothing is held of `budget` while
 * a line is handed out (pending bytes are only those before a chunk's first newline, joined and
 * given back before that line is yielded), so a reader that stops iterating leaks nothing.
 */
export async function* ndjsonLines(src: AsyncIterable<Buffer | string>, opts: LineOptions = {}): AsyncGenerator<string> {
  const cap = opts.maxLineBytes ?? DEFAULT_READ_LIMITS.lineBytes;
  const budget = opts.budget;
  const meter = opts.meter;
  // The start of the line being read, from earlier chunks.
  let pending: Buffer[] = [];
  let pendingLen = 0;
  let held = 0;
  try {
    for await (const c of src) {
      const chunk = typeof c === 'string' ? Buffer.from(c, 'utf8') : c;
      let start = 0;
      let nl = chunk.indexOf(10);
      if (nl >= 0 && pendingLen > 0) {
        if (pendingLen + nl > cap) throw lineTooLong(cap, 'inflated');
        pending.push(chunk.subarray(0, nl));
        const line = Buffer.concat(pending, pendingLen + nl);
        pending = [];
        pendingLen = 0;
        budget?.give(held);
        held = 0;
        const s = lineText(line, 0, line.length);
        if (meter) meter.sinceLine = 0;
        if (s !== undefined) yield s;
        start = nl + 1;
        nl = chunk.indexOf(10, start);
      }
      for (; nl >= 0; nl = chunk.indexOf(10, start)) {
        if (nl - start > cap) throw lineTooLong(cap, 'inflated');
        const s = lineText(chunk, start, nl);
        start = nl + 1;
        if (meter) meter.sinceLine = 0;
        if (s !== undefined) yield s;
      }
      if (start < chunk.length) {
        const rest = start === 0 ? chunk : chunk.subarray(start);
        if (pendingLen + rest.length > cap) throw lineTooLong(cap, 'inflated');
        budget?.take(rest.length);
        held += rest.length;
        pending.push(rest);
        pendingLen += rest.length;
      }
    }
    if (pendingLen > 0) {
      const line = Buffer.concat(pending, pendingLen);
      budget?.give(held);
      held = 0;
      const s = lineText(line, 0, line.length);
      if (s !== undefined) yield s;
    }
  } finally {
    budget?.give(held);
  }
}

/** The text of bytes [start, end), or undefined for a blank line. */
function lineText(buf: Buffer, start: number, end: number): string | undefined {
  if (end === start) return undefined;
  // JSON lines start with `{`; anything else is checked for being blank (then skipped).
  if (buf[start] !== 0x7b && buf.toString('latin1', start, end).trim() === '') return undefined;
  const bytes = buf.subarray(start, end);
  if (!isUtf8(bytes)) throw new WireError(`a stream line that is not valid UTF-8: ${snippet(bytes)}`);
  return buf.toString('utf8', start, end);
}
