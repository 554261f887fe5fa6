// NDJSON streams (List, Watch): the answer decoded as its bytes arrive (gzip inflated incrementally,
// as Omni sync-flushes per line), split into lines within the line limit (docs/design.md rule 12), and
// each line read as one message: `{"result":...}`, or `{"error":{...}}` (Omni's error after a 200).

import { isUtf8 } from 'node:buffer';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { Dispatcher } from 'undici';
import {
  DEFAULT_READ_LIMITS,
  describeBytes,
  encodingOfAnswer,
  parseJsonText,
  snippet,
  type Encoding,
  type ReadBudget,
  type ReadLimits,
} from './body.js';
import { errCtx, type CallContext } from './call.js';
import { errorFromStatus } from '../../omni-api/errors.js';
import { isObject, statusOf } from './status.js';
import { WireError } from '../../omni-api/wire.js';
import { type MethodName } from '../../omni-api/wire.js';

/** A line a stream's reader did not want: counted by the reader, never parsed (it is not data). */
export const SKIPPED: unique symbol = Symbol('skipped stream line');

export interface ResultsOptions {
  /** Told of every chunk read (bytes, decoded): the stream is delivering. */
  onBytes?: ((bytes: number) => void) | undefined;
  /** Asked before each line is parsed: true skips it (SKIPPED is yielded instead of its result). */
  skip?: (() => boolean) | undefined;
}

/**
 * The `result` of each line of a stream answer; an `{"error":..}` line becomes the typed error (with
 * a gRPC status, else a WireError), anything else that is not a message a WireError. A line that
 * `skip` declines is SKIPPED: checked for its size only, not read (nor checked as UTF-8: see LineOptions.skip).
 */
export async function* results(
  method: MethodName,
  ctx: CallContext,
  res: Dispatcher.ResponseData,
  limits: ReadLimits,
  budget: ReadBudget,
  o: ResultsOptions = {},
): AsyncGenerator<unknown> {
  const { src, meter } = streamOf(res.body, encodingOfAnswer(res), limits);
  const lines = new LineSplitter({ maxLineBytes: limits.lineBytes, budget, meter, skip: o.skip });
  const onBytes = o.onBytes;
  // The lines of each chunk are split synchronously, not through ndjsonLines: one async step less per
  // line, for every List item and every watch event.
  try {
    for await (const c of src as AsyncIterable<Buffer | string>) {
      const chunk = typeof c === 'string' ? Buffer.from(c, 'utf8') : c;
      onBytes?.(chunk.length);
      for (const line of lines.of(chunk)) yield line === SKIPPED_TEXT ? SKIPPED : resultOf(method, ctx, res, line);
    }
    for (const line of lines.end()) yield line === SKIPPED_TEXT ? SKIPPED : resultOf(method, ctx, res, line);
  } finally {
    lines.release();
  }
}

/** The `result` of one stream line, or its error thrown (see `results`). */
function resultOf(method: MethodName, ctx: CallContext, res: Dispatcher.ResponseData, line: string): unknown {
  const msg = parseJsonText(line, 'a stream line');
  if (!isObject(msg)) throw new WireError(`a stream line that is not a JSON object: ${snippet(line)}`);
  const o = msg as { result?: unknown; error?: unknown };
  if (o.error !== undefined && o.error !== null) {
    const st = statusOf(o.error);
    if (!st) throw new WireError(`a stream error line without a gRPC status: ${snippet(line)}`);
    throw errorFromStatus(st.code, st.message, { ...errCtx(method, ctx), httpStatus: res.statusCode });
  }
  if (!isObject(o.result)) throw new WireError(`a stream line without a result object: ${snippet(line)}`);
  return o.result;
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
export function streamOf(
  body: Readable,
  encoding: Encoding,
  limits: ReadLimits,
): { src: Readable; meter?: CompressedMeter } {
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
  return new WireError(
    `a stream line of more than ${describeBytes(cap)}${how === 'compressed' ? ' of compressed data' : ''}`,
    'STUB_LINE_TOO_LONG',
  );
}

export interface LineOptions {
  /** Bytes of one line at most (default DEFAULT_READ_LIMITS.lineBytes). */
  maxLineBytes?: number;
  /** Where the bytes of an incomplete line are counted while it is buffered. */
  budget?: ReadBudget;
  /** Told of every line (the compressed meter starts counting again). */
  meter?: CompressedMeter | undefined;
  /** Told of the bytes of every chunk read (decoded): the stream is delivering. */
  onBytes?: ((bytes: number) => void) | undefined;
  /**
   * Asked for each line within the limit: true yields SKIPPED_TEXT instead of the line's text, whose
   * bytes are then neither checked as UTF-8 nor copied into a string.
   */
  skip?: (() => boolean) | undefined;
}

/** What ndjsonLines yields for a line that `skip` declined: never a line's text (blank lines are not yielded). */
const SKIPPED_TEXT = '';

/**
 * Splits a byte stream into lines, whatever the chunking (multi-byte characters included). Each line
 * is checked to be UTF-8 (strictly) and at most `maxLineBytes` long, counted while it arrives; blank
 * lines are skipped and a last line without a newline is kept. Nothing is held of `budget` while
 * a line is handed out (pending bytes are only those before a chunk's first newline, joined and
 * given back before that line is yielded), so a reader that stops iterating leaks nothing.
 */
export async function* ndjsonLines(
  src: AsyncIterable<Buffer | string>,
  opts: LineOptions = {},
): AsyncGenerator<string> {
  const lines = new LineSplitter(opts);
  const onBytes = opts.onBytes;
  try {
    for await (const c of src) {
      const chunk = typeof c === 'string' ? Buffer.from(c, 'utf8') : c;
      onBytes?.(chunk.length);
      yield* lines.of(chunk);
    }
    yield* lines.end();
  } finally {
    lines.release();
  }
}

/** ndjsonLines' work on one chunk at a time, synchronously; `release` gives back what it holds of the budget. */
class LineSplitter {
  readonly #cap: number;
  readonly #budget: ReadBudget | undefined;
  readonly #meter: CompressedMeter | undefined;
  readonly #skip: (() => boolean) | undefined;
  /** The start of the line being read, from earlier chunks. */
  #pending: Buffer[] = [];
  #pendingLen = 0;
  #held = 0;

  constructor(opts: LineOptions) {
    this.#cap = opts.maxLineBytes ?? DEFAULT_READ_LIMITS.lineBytes;
    this.#budget = opts.budget;
    this.#meter = opts.meter;
    this.#skip = opts.skip;
  }

  #text(buf: Buffer, start: number, end: number): string | undefined {
    return this.#skip && end > start && this.#skip() ? SKIPPED_TEXT : lineText(buf, start, end);
  }

  /** The lines that `chunk` ends, in order; what follows its last newline is kept for the next chunk. */
  *of(chunk: Buffer): Generator<string, void, undefined> {
    const cap = this.#cap;
    const meter = this.#meter;
    let start = 0;
    let nl = chunk.indexOf(10);
    if (nl >= 0 && this.#pendingLen > 0) {
      if (this.#pendingLen + nl > cap) throw lineTooLong(cap, 'inflated');
      this.#pending.push(chunk.subarray(0, nl));
      const line = Buffer.concat(this.#pending, this.#pendingLen + nl);
      this.#pending = [];
      this.#pendingLen = 0;
      this.release();
      const s = this.#text(line, 0, line.length);
      if (meter) meter.sinceLine = 0;
      if (s !== undefined) yield s;
      start = nl + 1;
      nl = chunk.indexOf(10, start);
    }
    for (; nl >= 0; nl = chunk.indexOf(10, start)) {
      if (nl - start > cap) throw lineTooLong(cap, 'inflated');
      const s = this.#text(chunk, start, nl);
      start = nl + 1;
      if (meter) meter.sinceLine = 0;
      if (s !== undefined) yield s;
    }
    if (start < chunk.length) {
      const rest = start === 0 ? chunk : chunk.subarray(start);
      if (this.#pendingLen + rest.length > cap) throw lineTooLong(cap, 'inflated');
      this.#budget?.take(rest.length);
      this.#held += rest.length;
      this.#pending.push(rest);
      this.#pendingLen += rest.length;
    }
  }

  /** The last line, when the stream ended without a newline after it. */
  *end(): Generator<string, void, undefined> {
    if (this.#pendingLen === 0) return;
    const line = Buffer.concat(this.#pending, this.#pendingLen);
    this.#pending = [];
    this.#pendingLen = 0;
    this.release();
    const s = this.#text(line, 0, line.length);
    if (s !== undefined) yield s;
  }

  release(): void {
    this.#budget?.give(this.#held);
    this.#held = 0;
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
