// Design rule 13: text that a server, a BMC or a command chose (IDs, labels, finalizers, error
// messages, output) is inert wherever a person reads it. A terminal acts on control characters: ESC
// starts sequences that move the cursor, clear the screen or retitle the window, CR and LF let a
// string forge a line of our own output, and bidi controls reorder what is shown. Each of them is
// replaced by a visible escape, so the text shows what it holds instead of doing it.

/** C0 controls, DEL, C1 controls (NEL included), bidi marks, embeddings, overrides and isolates, and the Unicode line and paragraph separators. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/gu;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(c: string): string {
  const named = NAMED[c];
  if (named) return named;
  const n = c.charCodeAt(0);
  return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
}

/** `s` with every control, bidi and line-separator character written as `\n`, `\x1b`, `\u202e`, ...; everything else as it is. */
export function escapeControl(s: string): string {
  return s.replace(UNSAFE, escapeOne);
}
