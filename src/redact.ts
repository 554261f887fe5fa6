// No secret is ever echoed (docs/design.md rule 9): the one function every output goes through before
// it is written (the stderr line, the logs, the result on stdout, the report, the audit log), wherever
// the text came from. A secret may come back out of any message that quotes what it was given (a
// key passed where a path or an endpoint goes, a URL with a password), so redaction is by value, not
// by field: what is known to be secret (the service-account key as given, the key file's text, BMC
// passwords), any slice of it of WINDOW characters or more; and what looks secret whoever gave it: a
// service-account key (base64 of JSON with `pgp_key`), an armored PGP block, the userinfo of a
// URL-like value with a password, whatever its scheme. Imports nothing: log.ts, the commands and
// cli.ts use it alike.

const REDACTED = '[redacted]';
/** A known secret is found by any slice of it this long (shorter secrets: whole). */
const WINDOW = 12;
/** Shorter known secrets are not looked for (a 3-character password would redact every such word). */
const MIN_SECRET = 4;
const BASE64 = /[A-Za-z0-9+/]/;

/** The known secrets' windows of one length. */
interface Windows {
  /** Every secret's slices of this length (or short secrets whole). */
  texts: Set<string>;
  /** The same windows by rolling hash, for one pass over a text. */
  hashes: Set<number>;
  /**
   * The same hashes' low 16 bits, one byte each: a text's position whose hash is not there is passed
   * with one array read (most are), not a Set lookup (an 11 000-item plan report is millions of positions).
   */
  filter: Uint8Array;
  /** BASE^(length-1), to roll the hash. */
  top: number;
}

/** The secrets of this process, registered as they become known; `redact` uses them. */
class Secrets {
  /** Window length -> the windows of that length. */
  private readonly byLength = new Map<number, Windows>();

  add(secret: string | undefined): void {
    if (!secret || secret.length < MIN_SECRET) return;
    const w = Math.min(WINDOW, secret.length);
    let ws = this.byLength.get(w);
    if (!ws) {
      ws = { texts: new Set(), hashes: new Set(), filter: new Uint8Array(FILTER_SIZE), top: powOf(w) };
      this.byLength.set(w, ws);
    }
    for (let i = 0; i + w <= secret.length; i++) {
      const slice = secret.slice(i, i + w);
      if (ws.texts.has(slice)) continue;
      ws.texts.add(slice);
      const h = hashOf(slice, 0, w);
      ws.hashes.add(h);
      ws.filter[h & (FILTER_SIZE - 1)] = 1;
    }
  }

  /** Where a known secret's slices are in `text`: [start, end) pairs, unmerged. */
  find(text: string): [number, number][] {
    const found: [number, number][] = [];
    for (const [w, { texts, hashes, filter, top }] of this.byLength) {
      if (text.length < w) continue;
      let h = hashOf(text, 0, w);
      for (let i = 0; ; i++) {
        if (filter[h & (FILTER_SIZE - 1)] === 1 && hashes.has(h) && texts.has(text.slice(i, i + w)))
          found.push([i, i + w]);
        if (i + w >= text.length) break;
        h = (Math.imul(h - Math.imul(text.charCodeAt(i), top), BASE) + text.charCodeAt(i + w)) >>> 0;
      }
    }
    return found;
  }
}

const BASE = 257;
/** Entries of each length's filter (a power of two). */
const FILTER_SIZE = 1 << 16;

function hashOf(s: string, from: number, w: number): number {
  let h = 0;
  for (let i = from; i < from + w; i++) h = (Math.imul(h, BASE) + s.charCodeAt(i)) >>> 0;
  return h;
}

/** BASE^(w-1) mod 2^32. */
function powOf(w: number): number {
  let p = 1;
  for (let i = 1; i < w; i++) p = Math.imul(p, BASE) >>> 0;
  return p;
}

const secrets = new Secrets();

/** Environment variables whose value is a secret wherever it shows up later. */
const SECRET_VARIABLES = ['OMNI_SERVICE_ACCOUNT_KEY', 'SIDERO_SERVICE_ACCOUNT_KEY'];

/**
 * Registers a secret: every later `redact` removes it, and any slice of it of WINDOW characters. A
 * service-account key's armored private key is registered with it (its lines are slices of neither).
 */
export function addSecret(secret: string | undefined): void {
  if (!secret) return;
  secrets.add(secret);
  const trimmed = secret.trim();
  if (trimmed !== secret) secrets.add(trimmed);
  const armored = pgpKeyOf(trimmed);
  if (armored) for (const line of armored.split(/\r?\n/)) secrets.add(line.trim());
}

/** The secrets an environment holds (the service-account key variables). */
export function addSecretsOf(env: NodeJS.ProcessEnv): void {
  for (const name of SECRET_VARIABLES) addSecret(env[name]);
}

/** The `pgp_key` of a base64 service-account key, if `text` is one. */
function pgpKeyOf(text: string): string | undefined {
  if (text.length < 64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return undefined;
  try {
    const v = JSON.parse(Buffer.from(text, 'base64').toString('utf8')) as { pgp_key?: unknown };
    return typeof v.pgp_key === 'string' ? v.pgp_key : undefined;
  } catch {
    return undefined;
  }
}

const PGP_BEGIN = '-----BEGIN PGP';
const PGP_BLOCK = /-----BEGIN PGP[\s\S]*?(?:-----END PGP[A-Z ]*-----|(?=(?<!\\)")|$)/g;
/** The shortest run BASE64_RUN matches. */
const BASE64_RUN_MIN = 64;
const BASE64_RUN = /[A-Za-z0-9+/]{64,}={0,2}/g;
/** `scheme://user:password@` or `user:password@` after a start or a separator; the password may be empty. */
const USERINFO = /(^|[\s"'(=<,[{])([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)?[^\s:@/"'\\<>]+:[^\s@"'\\<>]*@/g;

/**
 * `text` with every secret replaced by `[redacted]`. Safe on JSON text (a log line, the audit log):
 * nothing that a JSON string's escaping needs is cut in two, so what was valid JSON stays valid.
 */
export function redact(text: string): string {
  if (text.length < MIN_SECRET) return text;
  const regions = secrets.find(text);
  // Each pattern only where it can match (most strings of a report are short words and IDs): a
  // matchAll per string copies its RegExp.
  if (text.includes(PGP_BEGIN))
    for (const m of text.matchAll(PGP_BLOCK)) regions.push([m.index, m.index + m[0].length]);
  if (text.length >= BASE64_RUN_MIN)
    for (const m of text.matchAll(BASE64_RUN)) if (looksLikeKey(m[0])) regions.push([m.index, m.index + m[0].length]);
  let out = regions.length === 0 ? text : cut(text, regions);
  if (out.includes('@')) out = out.replace(USERINFO, `$1$2${REDACTED}@`);
  return out;
}

/** Every string in a value (a result, a report) redacted; the value otherwise as it was. */
export function redactDeep<T>(value: T): T {
  if (typeof value === 'string') return redact(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => redactDeep(v)) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v);
    return out as T;
  }
  return value;
}

/** A base64 run that decodes (at any of the four alignments of a slice) to a key's JSON or armor. */
function looksLikeKey(run: string): boolean {
  for (let shift = 0; shift < 4; shift++) {
    const s = run.slice(shift, shift + Math.floor((run.length - shift) / 4) * 4);
    const decoded = Buffer.from(s, 'base64').toString('latin1');
    if (/pgp_key|BEGIN PGP|PRIVATE KEY/.test(decoded)) return true;
  }
  return false;
}

/** Replaces the merged regions, each widened over the base64 run it sits in and kept clear of JSON escapes. */
function cut(text: string, regions: [number, number][]): string {
  regions.sort((a, b) => a[0] - b[0]);
  let out = '';
  let at = 0;
  let i = 0;
  while (i < regions.length) {
    let [start, end] = regions[i]!;
    for (i++; i < regions.length && regions[i]![0] <= end; i++) end = Math.max(end, regions[i]![1]);
    while (start > at && BASE64.test(text[start - 1]!)) start--;
    while (end < text.length && BASE64.test(text[end]!)) end++;
    for (let pad = 0; pad < 2 && text[end] === '='; pad++) end++;
    // An escaped character at the start takes its backslash along; a backslash at the end that escapes
    // the character after it stays (or that character would lose its escape).
    if (start > at && oddBackslashesBefore(text, start)) start--;
    if (end > start && oddBackslashesBefore(text, end)) end--;
    if (end <= start) continue;
    out += text.slice(at, start) + REDACTED;
    at = end;
  }
  return out + text.slice(at);
}

function oddBackslashesBefore(text: string, i: number): boolean {
  let n = 0;
  while (i - n - 1 >= 0 && text[i - n - 1] === '\\') n++;
  return n % 2 === 1;
}
