// Text that came from outside (Omni, a proxy, a BMC, a command) made inert before a person reads it
// (docs/design.md rule 13): a resource ID, an error message or a header with ESC, CR or LF in it must not
// clear the screen, move the cursor or forge a line of our own output.

/**
 * What a terminal or a viewer would act on: C0 controls (tab, CR and LF included), DEL, C1 controls,
 * the line and paragraph separators U+2028/U+2029, the bidirectional marks, embeddings, overrides and
 * isolates (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), and lone surrogates (printed as
 * U+FFFD, they would make two different strings look the same).
 */
const UNSAFE = new RegExp(
  [
    String.raw`[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]`,
    String.raw`[\ud800-\udbff](?![\udc00-\udfff])`,
    String.raw`(?<![\ud800-\udbff])[\udc00-\udfff]`,
  ].join('|'),
  'g',
);

const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(c: string): string {
  const short = SHORT[c];
  if (short !== undefined) return short;
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `s` with every character of UNSAFE written as a visible escape (`\n`, `\x1b`, `\u202e`); everything
 * else, non-ASCII letters included, as it is. A backslash is left alone, so escaping twice changes
 * nothing: code that escapes at different layers (an error message, then the report) cannot double it.
 * The escapes are for reading, not a reversible encoding; JSON output stays JSON and needs none.
 */
export function escapeControl(s: string): string {
  UNSAFE.lastIndex = 0;
  // Most text (IDs, Omni's messages) has nothing to escape: test once, allocate nothing.
  if (!UNSAFE.test(s)) return s;
  UNSAFE.lastIndex = 0;
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
 * What JSON.stringify leaves raw of UNSAFE (it escapes C0 controls and lone surrogates itself): DEL,
 * C1 controls, bidi controls and the Unicode line separators.
 */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;

/**
 * JSON text (JSON.stringify's) with the unsafe characters it leaves raw written as `\uXXXX`: the
 * same value for a program that parses it, and inert for a person who prints the file. Outside
 * strings JSON text is ASCII, so every match is inside a string, where `\uXXXX` is its own escape.
 */
export function inertJson(json: string): string {
  return json.replace(UNSAFE_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
