// siderov1 signature verification of the simulated Omni, as Omni does it
// (docs/omni-wire.md 3.3; go-api-signature `pkg/message`, Omni's signature interceptor and authenticator):
//   - the gateway turns `Grpc-Metadata-<key>` headers into metadata `<key>` (lower-cased; values that
//     are not printable ASCII are dropped) and `Authorization` into `authorization`;
//   - the signature header is parsed first: missing, another version or bad base64 -> "invalid
//     signature"; `siderov1` with fewer than four fields panics in Omni, which its recovery
//     interceptor turns into Internal;
//   - the key is looked up by the header's fingerprint only (the identity field is never compared),
//     and must not be past its expiration;
//   - timestamp within ±5 minutes of the server clock, payload `method` equal to the called method,
//     the ten listed headers deep-equal between payload and metadata;
//   - an OpenPGP detached signature over the exact payload bytes, checked at "now" and, failing that,
//     at now + min(5 min, key lifetime / 2) for signers whose clock runs slightly ahead.
// Every failure is Unauthenticated "invalid signature"; nothing says which check failed.
// The identities and keys it checks against are identities.ts.

import * as openpgp from 'openpgp';
import type { Identity } from '../api.js';
import { InternalError, UnauthenticatedError } from '../../omni-api/errors.js';

export const INVALID_SIGNATURE = 'invalid signature';

/** How far the signed timestamp may be from the server clock, either way. */
export const SKEW_MS = 5 * 60 * 1000;
const DEFAULT_CACHE_SIZE = 1024;
/** Parsed payloads kept (one per method and second per client is what repeats). */
const PAYLOAD_CACHE_SIZE = 64;

/** The headers whose values the payload must repeat exactly (go-api-signature `includedHeaders`). */
export const SIGNED_HEADERS = [
  'x-sidero-timestamp',
  'nodes',
  'selectors',
  'fieldSelectors',
  'runtime',
  'context',
  'cluster',
  'namespace',
  'uid',
  'authorization',
] as const;

/** A registered public key, as verification needs it (identities.ts reads and checks it). */
export interface StoredKey {
  fingerprint: string;
  key: openpgp.PublicKey;
  /** ms since the epoch; keys without one are refused at registration, as Omni does. */
  expiresAt: number;
  /** How far ahead of "now" a second verification may look (min(5 min, lifetime / 2)). */
  retrySkewMs: number;
  identityName: string;
}

/** A key found by its fingerprint, and the identity it belongs to. */
export interface SignerKey {
  key: StoredKey;
  identity: Identity;
}

/** HTTP request headers as Node gives them (names lower-cased; a string[] for repeated ones). */
export type HeaderMap = Record<string, string | string[] | undefined>;

/** gRPC metadata as Omni's interceptors see it: lower-case keys, values in order. */
export type GrpcMetadata = Map<string, string[]>;

function isPrintableAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

const HEADER_NAME_RE = /^[0-9A-Za-z._-]+$/;

/** grpc-gateway's default incoming header matcher, for the parts that matter to signatures. */
export function metadataFromHeaders(headers: HeaderMap): GrpcMetadata {
  const md: GrpcMetadata = new Map();
  const add = (key: string, value: string): void => {
    // Values that are not printable ASCII are dropped by the gateway (only logged).
    if (!isPrintableAscii(value)) return;
    const list = md.get(key);
    if (list) list.push(value);
    else md.set(key, [value]);
  };
  for (const [rawName, rawValue] of Object.entries(headers)) {
    if (rawValue === undefined) continue;
    const name = rawName.toLowerCase();
    const values = Array.isArray(rawValue) ? rawValue : [rawValue];
    let key: string | undefined;
    if (name.startsWith('grpc-metadata-')) key = name.slice('grpc-metadata-'.length);
    else if (name === 'authorization') key = 'authorization';
    if (key === undefined || key === '' || !HEADER_NAME_RE.test(key)) continue;
    for (const v of values) add(key, v);
  }
  return md;
}

interface ParsedPayload {
  headers: Map<string, string[] | null>;
  method: string;
}

/**
 * Decodes the payload the way Go's encoding/json fills `GRPCPayload{Headers map[string][]string; Method string}`:
 * top-level keys match case-insensitively (the last one wins), `null` leaves a field unset, a wrong
 * type is an error.
 */
function parsePayload(text: string): ParsedPayload {
  const doc: unknown = JSON.parse(text);
  const out: ParsedPayload = { headers: new Map(), method: '' };
  if (doc === null) return out;
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error('payload is not an object');
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    const lk = k.toLowerCase();
    if (lk === 'method') {
      if (v === null) continue;
      if (typeof v !== 'string') throw new Error('method is not a string');
      out.method = v;
    } else if (lk === 'headers') {
      if (v === null) continue;
      if (typeof v !== 'object' || Array.isArray(v)) throw new Error('headers is not an object');
      const headers = new Map<string, string[] | null>();
      for (const [hk, hv] of Object.entries(v as Record<string, unknown>)) {
        if (hv === null) {
          headers.set(hk, null);
          continue;
        }
        if (!Array.isArray(hv)) throw new Error(`header ${hk} is not an array`);
        // A JSON null inside a []string decodes to "" in Go.
        headers.set(
          hk,
          hv.map((x) => {
            if (x === null) return '';
            if (typeof x !== 'string') throw new Error(`header ${hk} has a non-string value`);
            return x;
          }),
        );
      }
      out.headers = headers;
    }
  }
  return out;
}

/** reflect.DeepEqual of the payload's []string (nil for null/absent) with the metadata's values (nil when absent). */
function headerValuesEqual(fromPayload: string[] | null | undefined, fromMetadata: string[] | undefined): boolean {
  if (fromPayload === null || fromPayload === undefined) return fromMetadata === undefined;
  if (fromMetadata === undefined) return false; // `[]` is not "absent"
  return fromPayload.length === fromMetadata.length && fromPayload.every((v, i) => v === fromMetadata[i]);
}

/** strconv.ParseInt(s, 10, 64): optional sign, decimal digits, int64 range. */
function parseGoInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  if (n > 0x7fff_ffff_ffff_ffffn || n < -0x8000_0000_0000_0000n) return undefined;
  return n;
}

/** encoding/base64 StdEncoding: padded alphabet only (it also skips CR/LF, which a header cannot carry). */
function decodeStdBase64(s: string): Uint8Array | undefined {
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return undefined;
  return new Uint8Array(Buffer.from(s, 'base64'));
}

function invalid(): UnauthenticatedError {
  return new UnauthenticatedError(INVALID_SIGNATURE);
}

function firstValue(md: GrpcMetadata, key: string): string {
  return md.get(key)?.[0] ?? '';
}

/**
 * The siderov1 check, with what it keeps between calls: the parses of recent payloads and the
 * verifications that succeeded (bounded, oldest evicted first).
 */
export class Siderov1Verifier {
  /** (fingerprint, payload, signature) -> true, for verifications that succeeded; insertion-ordered for eviction. */
  private readonly verified = new Map<string, true>();
  private readonly payloads = new Map<string, ParsedPayload>();
  private readonly cacheSize: number;

  /** `verifiedCacheSize`: upper bound of memoised successful verifications (default 1024). */
  constructor(verifiedCacheSize?: number) {
    this.cacheSize = Math.max(0, verifiedCacheSize ?? DEFAULT_CACHE_SIZE);
  }

  /** Number of memoised verifications (for tests of the bound). */
  get verifiedCacheEntries(): number {
    return this.verified.size;
  }

  /** Forgets the memoised verifications (an account went away). */
  forget(): void {
    this.verified.clear();
  }

  /**
   * Verifies siderov1 metadata at the sim time `nowMs` for the method `fullMethod`; `lookup` finds a
   * key by the header's fingerprint, with the identity it belongs to. Returns a copy of that identity.
   */
  async verify(
    md: GrpcMetadata,
    fullMethod: string,
    nowMs: number,
    lookup: (fingerprint: string) => SignerKey | undefined,
  ): Promise<Identity> {
    // 1. Parse the signature header (the interceptor does this before anything else).
    const sigHeader = firstValue(md, 'x-sidero-signature');
    if (sigHeader === '') throw invalid();
    const parts = sigHeader.split(' ');
    if (parts[0] !== 'siderov1') throw invalid();
    if (parts.length < 4) {
      // Omni indexes the fourth field unchecked; the panic surfaces through its recovery interceptor.
      throw new InternalError(`runtime error: index out of range [3] with length ${parts.length}`);
    }
    const fingerprint = parts[2] ?? '';
    const signatureText = parts[3] ?? '';

    // 2. Authenticator: the key by fingerprint (IDs are case-sensitive), not expired, its account.
    const found = lookup(fingerprint);
    if (!found || found.key.expiresAt < nowMs) throw invalid();
    const { key: stored, identity } = found;

    // 3. Timestamp, payload, headers.
    const ts = parseGoInt64(firstValue(md, 'x-sidero-timestamp'));
    if (ts === undefined) throw invalid();
    const tsMs = Number(ts) * 1000;
    if (tsMs > nowMs + SKEW_MS || tsMs < nowMs - SKEW_MS) throw invalid();
    const payloadText = firstValue(md, 'x-sidero-payload');
    if (payloadText === '') throw invalid();
    let payload: ParsedPayload;
    try {
      payload = this.parsedPayload(payloadText);
    } catch {
      throw invalid();
    }
    if (payload.method !== fullMethod) throw invalid();
    for (const h of SIGNED_HEADERS) {
      // Metadata keys are lower case, so `fieldSelectors` never matches anything there: always absent.
      if (!headerValuesEqual(payload.headers.get(h), md.get(h))) throw invalid();
    }

    // 4. The OpenPGP signature over the exact payload bytes (malformed base64 is refused here, with
    // the same error as any other bad signature).
    if (!(await this.verifySignature(stored, payloadText, signatureText, nowMs))) throw invalid();
    return { ...identity };
  }

  /**
   * A client signs once per method per second, so the same payload arrives with many calls in a row:
   * its parse is kept for the next ones (a handful of entries; parsing is pure, so sharing is safe).
   */
  private parsedPayload(text: string): ParsedPayload {
    let p = this.payloads.get(text);
    if (!p) {
      p = parsePayload(text);
      if (this.payloads.size >= PAYLOAD_CACHE_SIZE) this.payloads.delete(this.payloads.keys().next().value as string);
      this.payloads.set(text, p);
    }
    return p;
  }

  private async verifySignature(
    k: StoredKey,
    payloadText: string,
    signatureText: string,
    nowMs: number,
  ): Promise<boolean> {
    // Keyed by the header's text: a success was checked for exactly these bytes before.
    const cacheKey = `${k.fingerprint}\n${signatureText}\n${payloadText}`;
    if (this.verified.has(cacheKey)) return true;
    const signature = decodeStdBase64(signatureText);
    if (!signature) return false;
    const bytes = new Uint8Array(Buffer.from(payloadText, 'latin1'));
    const ok =
      (await verifyDetachedAt(k.key, bytes, signature, nowMs)) ||
      (await verifyDetachedAt(k.key, bytes, signature, nowMs + k.retrySkewMs));
    // Only successes are memoised: a signature from a clock ahead may become valid later.
    if (ok && this.cacheSize > 0) {
      if (this.verified.size >= this.cacheSize) {
        const oldest = this.verified.keys().next();
        if (!oldest.done) this.verified.delete(oldest.value);
      }
      this.verified.set(cacheKey, true);
    }
    return ok;
  }
}

async function verifyDetachedAt(
  key: openpgp.PublicKey,
  data: Uint8Array,
  signature: Uint8Array,
  atMs: number,
): Promise<boolean> {
  try {
    const sig = await openpgp.readSignature({ binarySignature: signature });
    const message = await openpgp.createMessage({ binary: data });
    const result = await openpgp.verify({
      message,
      signature: sig,
      verificationKeys: key,
      date: new Date(atMs),
      format: 'binary',
    });
    const first = result.signatures[0];
    if (!first) return false;
    await first.verified; // rejects when invalid
    return true;
  } catch {
    return false;
  }
}
