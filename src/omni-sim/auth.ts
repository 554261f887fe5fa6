// Identities of the simulated Omni and siderov1 signature verification, as Omni does it
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

import * as openpgp from 'openpgp';
import type { Identity, Role } from './api.js';
import { emailForIdentityName, PROVIDER_EMAIL_DOMAIN } from './keys.js';
import { InternalError, UnauthenticatedError } from '../omni-client/errors.js';

export const INVALID_SIGNATURE = 'invalid signature';

const PROVIDER_PREFIX = 'infra-provider:';
const SKEW_MS = 5 * 60 * 1000;
/** Omni's cap on service-account key lifetimes: 365 days plus one minute of tolerance. */
const MAX_LIFETIME_MS = (365 * 24 * 3600 + 60) * 1000;
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

/** A scenario or test asked for an identity Omni would not have created. */
export class IdentityError extends Error {
  readonly code = 'SIM_IDENTITY_INVALID';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'IdentityError';
  }
}

export interface IdentitySpec {
  /** `infra-provider:<id>` for providers (role InfraProvider implied), anything else for users. */
  name: string;
  /** Required for users; for `infra-provider:` names it may be omitted or must be InfraProvider. */
  role?: Role;
  /** Armored OpenPGP public keys (one or more, as after `omnictl infraprovider renewkey`). */
  publicKeys: string[];
}

interface StoredKey {
  fingerprint: string;
  key: openpgp.PublicKey;
  /** ms since the epoch; keys without one are refused at registration, as Omni does. */
  expiresAt: number;
  /** How far ahead of "now" a second verification may look (min(5 min, lifetime / 2)). */
  retrySkewMs: number;
  identityName: string;
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
        headers.set(hk, hv.map((x) => {
          if (x === null) return '';
          if (typeof x !== 'string') throw new Error(`header ${hk} has a non-string value`);
          return x;
        }));
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

export interface RegistryOptions {
  /** Upper bound of memoised successful verifications. Default 1024. */
  verifiedCacheSize?: number;
}

/**
 * The identities Omni knows (service accounts and users with their public keys) and the siderov1
 * check against them. Keys are indexed by lower-case fingerprint, as Omni stores PublicKey resources.
 */
export class IdentityRegistry {
  private readonly identities = new Map<string, Identity>();
  private readonly keys = new Map<string, StoredKey>();
  /** (fingerprint, payload, signature) -> true, for verifications that succeeded; insertion-ordered for eviction. */
  private readonly verified = new Map<string, true>();
  private readonly payloads = new Map<string, ParsedPayload>();
  private readonly cacheSize: number;

  constructor(opts: RegistryOptions = {}) {
    this.cacheSize = Math.max(0, opts.verifiedCacheSize ?? DEFAULT_CACHE_SIZE);
  }

  /** Adds an identity with its keys, checked the way Omni's CreateServiceAccount checks them. */
  async add(spec: IdentitySpec): Promise<Identity> {
    const identity = identityFromSpec(spec);
    if (this.identities.has(identity.name)) throw new IdentityError(`identity ${JSON.stringify(identity.name)} is defined twice`);
    if (spec.publicKeys.length === 0) throw new IdentityError(`identity ${JSON.stringify(identity.name)} has no public key`);
    const stored: StoredKey[] = [];
    for (const armored of spec.publicKeys) stored.push(await readPublicKey(armored, identity.name));
    for (const k of stored) {
      if (this.keys.has(k.fingerprint)) throw new IdentityError(`public key ${k.fingerprint} is registered twice`);
    }
    this.identities.set(identity.name, identity);
    for (const k of stored) this.keys.set(k.fingerprint, k);
    return { ...identity };
  }

  /** `omnictl infraprovider renewkey`: one more key for an existing identity. */
  async addKey(name: string, armoredPublicKey: string): Promise<string> {
    if (!this.identities.has(name)) throw new IdentityError(`no identity ${JSON.stringify(name)}`);
    const k = await readPublicKey(armoredPublicKey, name);
    if (this.keys.has(k.fingerprint)) throw new IdentityError(`public key ${k.fingerprint} is registered twice`);
    this.keys.set(k.fingerprint, k);
    return k.fingerprint;
  }

  /**
   * Deletes the account and all its keys (InfraProviderCleanupController step 3): from now on its
   * signatures are refused. Returns whether it existed.
   */
  remove(name: string): boolean {
    const existed = this.identities.delete(name);
    for (const [fp, k] of this.keys) if (k.identityName === name) this.keys.delete(fp);
    // Memoised verifications are keyed by fingerprint and only consulted after a successful key
    // lookup, so they cannot outlive the key; clearing keeps the cache small anyway.
    if (existed) this.verified.clear();
    return existed;
  }

  /** The service account of provider `<id>` goes away (hook for the provider cleanup controller). */
  removeProvider(providerId: string): boolean {
    return this.remove(`${PROVIDER_PREFIX}${providerId}`);
  }

  get(name: string): Identity | undefined {
    const i = this.identities.get(name);
    return i ? { ...i } : undefined;
  }

  list(): Identity[] {
    return [...this.identities.values()].map((i) => ({ ...i }));
  }

  /** Fingerprints of an identity's keys (lower-case hex). */
  fingerprints(name: string): string[] {
    return [...this.keys.values()].filter((k) => k.identityName === name).map((k) => k.fingerprint);
  }

  /** Number of memoised verifications (for tests of the bound). */
  get verifiedCacheEntries(): number {
    return this.verified.size;
  }

  /**
   * Verifies a gateway request's siderov1 signature at the sim time `nowMs` and returns the caller.
   * Throws UnauthenticatedError("invalid signature"), or InternalError for a truncated siderov1 header.
   */
  async authenticate(headers: HeaderMap, fullMethod: string, nowMs: number): Promise<Identity> {
    return this.authenticateMetadata(metadataFromHeaders(headers), fullMethod, nowMs);
  }

  async authenticateMetadata(md: GrpcMetadata, fullMethod: string, nowMs: number): Promise<Identity> {
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
    const stored = this.keys.get(fingerprint);
    if (!stored || stored.expiresAt < nowMs) throw invalid();
    const identity = this.identities.get(stored.identityName);
    if (!identity) throw invalid();

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

  private async verifySignature(k: StoredKey, payloadText: string, signatureText: string, nowMs: number): Promise<boolean> {
    // Keyed by the header's text: a success was checked for exactly these bytes before.
    const cacheKey = `${k.fingerprint}\n${signatureText}\n${payloadText}`;
    if (this.verified.has(cacheKey)) return true;
    const signature = decodeStdBase64(signatureText);
    if (!signature) return false;
    const bytes = new Uint8Array(Buffer.from(payloadText, 'latin1'));
    const ok = (await verifyDetachedAt(k.key, bytes, signature, nowMs)) ||
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

async function verifyDetachedAt(key: openpgp.PublicKey, data: Uint8Array, signature: Uint8Array, atMs: number): Promise<boolean> {
  try {
    const sig = await openpgp.readSignature({ binarySignature: signature });
    const message = await openpgp.createMessage({ binary: data });
    const result = await openpgp.verify({ message, signature: sig, verificationKeys: key, date: new Date(atMs), format: 'binary' });
    const first = result.signatures[0];
    if (!first) return false;
    await first.verified; // rejects when invalid
    return true;
  } catch {
    return false;
  }
}

function identityFromSpec(spec: IdentitySpec): Identity {
  const name = spec.name.trim();
  if (name === '') throw new IdentityError('identity name is empty');
  const isProvider = name.startsWith(PROVIDER_PREFIX);
  if (isProvider) {
    const providerId = name.slice(PROVIDER_PREFIX.length);
    if (providerId === '') throw new IdentityError(`identity ${JSON.stringify(name)} names no provider`);
    if (spec.role !== undefined && spec.role !== 'InfraProvider') {
      throw new IdentityError(`identity ${JSON.stringify(name)}: infra provider accounts must have role InfraProvider, not ${spec.role}`);
    }
    const email = emailForIdentityName(name);
    return { name, email, role: 'InfraProvider', providerId: providerIdFromEmail(email) ?? providerId };
  }
  if (spec.role === undefined) throw new IdentityError(`identity ${JSON.stringify(name)} needs a role (Reader, Operator, Admin)`);
  if (spec.role === 'InfraProvider') {
    throw new IdentityError(`identity ${JSON.stringify(name)}: role InfraProvider is only allowed for "${PROVIDER_PREFIX}<id>" accounts`);
  }
  return { name, email: emailForIdentityName(name), role: spec.role };
}

/** auth.Check: an identity ending in `@infra-provider.serviceaccount.omni.sidero.dev` is that provider. */
export function providerIdFromEmail(email: string): string | undefined {
  const suffix = `@${PROVIDER_EMAIL_DOMAIN}`;
  return email.endsWith(suffix) ? email.slice(0, -suffix.length) : undefined;
}

async function readPublicKey(armored: string, identityName: string): Promise<StoredKey> {
  let key: openpgp.Key;
  try {
    key = await openpgp.readKey({ armoredKey: armored });
  } catch (e) {
    throw new IdentityError(`identity ${JSON.stringify(identityName)}: not an armored OpenPGP public key`, { cause: e });
  }
  if (key.isPrivate()) throw new IdentityError(`identity ${JSON.stringify(identityName)}: a private key was given where a public key is expected`);
  const created = key.getCreationTime().getTime();
  let expiration: Date | number | null;
  try {
    expiration = await key.getExpirationTime();
  } catch (e) {
    throw new IdentityError(`identity ${JSON.stringify(identityName)}: the key has no valid self-signature`, { cause: e });
  }
  if (!(expiration instanceof Date)) {
    throw new IdentityError(`identity ${JSON.stringify(identityName)}: the key must have an expiration (Omni refuses keys without one)`);
  }
  const lifetimeMs = expiration.getTime() - created;
  if (lifetimeMs > MAX_LIFETIME_MS) {
    throw new IdentityError(`identity ${JSON.stringify(identityName)}: key lifetime exceeds 365 days (Omni's limit)`);
  }
  return {
    fingerprint: key.getFingerprint().toLowerCase(),
    key: key as openpgp.PublicKey,
    expiresAt: expiration.getTime(),
    retrySkewMs: Math.min(SKEW_MS, Math.floor(lifetimeMs / 2)),
    identityName,
  };
}

/** The injected `authenticate(headers, fullMethod)` of the gateway, reading the sim clock. */
export function createAuthenticate(registry: IdentityRegistry, clock: { now(): number }) {
  return (headers: HeaderMap, fullMethod: string): Promise<Identity> => registry.authenticate(headers, fullMethod, clock.now());
}
