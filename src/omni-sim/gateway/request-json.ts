// A request body as Omni's gateway reads it (grpc-gateway's JSONPb marshaler): Go's encoding/json
// Decoder takes the first JSON value and ignores what follows, failing with Go's own words ("unexpected
// EOF" for a value cut short, "invalid character 'x' looking for beginning of value", ...); protojson
// then decodes that value and names the line and column of what it refuses
// (`proto: (line 1:95): unknown field "bogus"`, exchange 58 of the recordings). The position counts
// runes from the start of the value, which is why the sim needs the raw text and not the parsed object.

import { goQuoteRune } from '../store/backend.js';

/** Go's encoding/json error for a body whose first value is not JSON. */
export class GoJsonError extends Error {}

const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/** Go's quoteChar: the offending byte as a Go character literal (the rune of that byte's value). */
const quoteChar = (c: number): string => goQuoteRune(BigInt(c));

class Scanner {
  i = 0;
  constructor(private readonly b: Uint8Array) {}

  private eof(): never {
    throw new GoJsonError('unexpected EOF');
  }
  private bad(c: number, where: string): never {
    throw new GoJsonError(`invalid character ${quoteChar(c)} ${where}`);
  }
  private peek(): number {
    if (this.i >= this.b.length) this.eof();
    return this.b[this.i] as number;
  }
  private next(): number {
    const c = this.peek();
    this.i++;
    return c;
  }
  skipSpace(): void {
    while (this.i < this.b.length && SPACE.has(this.b[this.i] as number)) this.i++;
  }

  value(): void {
    this.skipSpace();
    const c = this.peek();
    if (c === 0x7b) return this.object();
    if (c === 0x5b) return this.array();
    if (c === 0x22) return this.string();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (c === 0x74) return this.literal('true');
    if (c === 0x66) return this.literal('false');
    if (c === 0x6e) return this.literal('null');
    this.bad(c, 'looking for beginning of value');
  }

  /** Past an opening `{` or `[`: true when the container closes right away (`{}`, `[]`). */
  private emptyContainer(close: number): boolean {
    this.i++;
    this.skipSpace();
    if (this.peek() !== close) return false;
    this.i++;
    return true;
  }

  private object(): void {
    if (this.emptyContainer(0x7d)) return;
    do {
      this.skipSpace();
      const k = this.peek();
      if (k !== 0x22) this.bad(k, 'looking for beginning of object key string');
      this.string();
      this.skipSpace();
      const colon = this.next();
      if (colon !== 0x3a) this.bad(colon, 'after object key');
      this.value();
    } while (this.another(0x7d, 'after object key:value pair'));
  }

  private array(): void {
    if (this.emptyContainer(0x5d)) return;
    do this.value();
    while (this.another(0x5d, 'after array element'));
  }

  /** After an item: true at a `,`, false at the closing byte; anything else is refused as `where`. */
  private another(close: number, where: string): boolean {
    this.skipSpace();
    const c = this.next();
    if (c === close) return false;
    if (c !== 0x2c) this.bad(c, where);
    return true;
  }

  private string(): void {
    this.i++;
    for (;;) {
      const c = this.next();
      if (c === 0x22) return;
      if (c < 0x20) this.bad(c, 'in string literal');
      if (c !== 0x5c) continue;
      const e = this.next();
      if (e === 0x75) {
        for (let k = 0; k < 4; k++) {
          const h = this.next();
          if (!/[0-9a-fA-F]/.test(String.fromCharCode(h))) this.bad(h, 'in \\u hexadecimal character escape');
        }
      } else if (!'"\\/bfnrt'.includes(String.fromCharCode(e))) this.bad(e, 'in string escape code');
    }
  }

  private digits(): void {
    while (this.i < this.b.length && (this.b[this.i] as number) >= 0x30 && (this.b[this.i] as number) <= 0x39) this.i++;
  }

  private isDigit(c: number): boolean {
    return c >= 0x30 && c <= 0x39;
  }

  private number(): void {
    if (this.peek() === 0x2d) {
      this.i++;
      const d = this.peek();
      if (!this.isDigit(d)) this.bad(d, 'in numeric literal');
    }
    if (this.next() !== 0x30) this.digits();
    // The value may end at the end of the body (a top-level number): not an EOF for Go.
    if (this.i < this.b.length && this.b[this.i] === 0x2e) {
      this.i++;
      const d = this.peek();
      if (!this.isDigit(d)) this.bad(d, 'after decimal point in numeric literal');
      this.digits();
    }
    if (this.i < this.b.length && (this.b[this.i] === 0x65 || this.b[this.i] === 0x45)) {
      this.i++;
      if (this.peek() === 0x2b || this.peek() === 0x2d) this.i++;
      const d = this.peek();
      if (!this.isDigit(d)) this.bad(d, 'in exponent of numeric literal');
      this.digits();
    }
  }

  private literal(word: string): void {
    this.i++;
    for (let k = 1; k < word.length; k++) {
      const c = this.next();
      if (c !== word.charCodeAt(k)) this.bad(c, `in literal ${word} (expecting '${word[k]}')`);
    }
  }
}

/**
 * The first JSON value of a body as Go's json.Decoder reads it: its text from its first byte, or
 * undefined for a body of nothing but spaces (io.EOF, which the gateway takes as an empty request).
 * Throws GoJsonError with Go's message for anything else that is not JSON.
 */
export function firstJsonValue(text: string): string | undefined {
  const bytes = Buffer.from(text, 'utf8');
  const s = new Scanner(bytes);
  s.skipSpace();
  if (s.i >= bytes.length) return undefined;
  const start = s.i;
  s.value();
  return bytes.subarray(start, s.i).toString('utf8');
}

/**
 * protojson's position of the object key `name` in `json` (the first one in document order), as
 * `line L:C` with C counting runes from 1, or undefined when no such key is there.
 */
export function keyPosition(json: string, name: string): string | undefined {
  const quoted = JSON.stringify(name);
  let i = 0;
  while (i < json.length) {
    const c = json[i];
    if (c !== '"') {
      i++;
      continue;
    }
    // A string token: find its end, then whether a colon follows (then it is a key).
    let j = i + 1;
    while (j < json.length && json[j] !== '"') j += json[j] === '\\' ? 2 : 1;
    const token = json.slice(i, j + 1);
    let k = j + 1;
    while (k < json.length && /\s/.test(json[k] ?? '')) k++;
    if (json[k] === ':' && safeParse(token) === JSON.parse(quoted)) {
      const before = json.slice(0, i);
      const line = before.split('\n').length;
      const col = [...before.slice(before.lastIndexOf('\n') + 1)].length + 1;
      return `line ${line}:${col}`;
    }
    i = j + 1;
  }
  return undefined;
}

function safeParse(token: string): unknown {
  try {
    return JSON.parse(token);
  } catch {
    return undefined;
  }
}
