// Design rule 13: text that a server, a BMC or a command chose (IDs, labels, finalizers, error
// messages, output) is inert wherever a person reads it. A terminal acts on control characters: ESC
// starts sequences that move the cursor, clear the screen or retitle the window, CR and LF let a
// string forge a line of our own output, and bidi controls reorder what is shown. Each of them is
// replaced by a visible escape, so the text shows what it holds instead of doing it.

/**
 * DEL, C1 controls (8-bit CSI and NEL included), bidi marks, embeddings, overrides and isolates, and
 * the Unicode line and paragraph separators: the unsafe characters that JSON.stringify leaves as
 * they are (it escapes the C0 controls itself).
 */
const RAW_IN_JSON = '\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069\\u2028\\u2029';
/** Those and the C0 controls. */
const UNSAFE = new RegExp(`[\\u0000-\\u001f${RAW_IN_JSON}]`, 'gu');
const UNSAFE_IN_JSON = new RegExp(`[${RAW_IN_JSON}]`, 'gu');

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex = (c: string, width: number) => c.charCodeAt(0).toString(16).padStart(width, '0');

function escapeOne(c: string): string {
  return NAMED[c] ?? (c.charCodeAt(0) < 0x100 ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`);
}

/** `s` with every control, bidi and line-separator character written as `\n`, `\x1b`, `\u202e`, ...; everything else as it is. */
export function escapeControl(s: string): string {
  return s.replace(UNSAFE, escapeOne);
}

/** A JSON-shaped value with escapeControl applied to every string in it, object keys included. */
export function escapeControlIn<T>(v: T): T {
  if (typeof v === 'string') return escapeControl(v) as T;
  if (Array.isArray(v)) return v.map((x: unknown) => escapeControlIn(x)) as T;
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[escapeControl(k)] = escapeControlIn(x);
    return out as T;
  }
  return v;
}

/**
 * JSON text (JSON.stringify's) with the unsafe characters it leaves raw written as `\uXXXX`: the
 * same value for a program that parses it, and inert for a person who prints the file. Outside
 * strings JSON text is ASCII, so every match is inside a string, where `\uXXXX` is its own escape.
 */
export function inertJson(json: string): string {
  return json.replace(UNSAFE_IN_JSON, (c) => `\\u${hex(c, 4)}`);
}
