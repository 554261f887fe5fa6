// Identities of the simulated Omni: its service accounts and users, with their OpenPGP public keys,
// checked when added the way Omni's CreateServiceAccount checks them (an expiration, a lifetime of
// at most 365 days, a public key; docs/omni-wire.md 3.1) and given the role Omni gives them
// (`infra-provider:<id>` accounts are InfraProvider; docs/omni-wire.md 3.4). A call's siderov1
// signature is verified against these keys by siderov1.ts (docs/omni-wire.md 3.3).

import * as openpgp from 'openpgp';
import type { Identity, Role } from '../api.js';
import {
  type GrpcMetadata,
  type HeaderMap,
  metadataFromHeaders,
  Siderov1Verifier,
  SKEW_MS,
  type StoredKey,
} from './siderov1.js';
import { emailForIdentityName, PROVIDER_EMAIL_DOMAIN } from '../scenario/keys.js';

// The module's exports as they were before the split, so that no importer has to change.

const PROVIDER_PREFIX = 'infra-provider:';
/** Omni's cap on service-account key lifetimes: 365 days plus one minute of tolerance. */
const MAX_LIFETIME_MS = (365 * 24 * 3600 + 60) * 1000;

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

export interface RegistryOptions {
  /** Upper bound of memoised successful verifications. Default 1024. */
  verifiedCacheSize?: number;
}

/**
 * The identities Omni knows (service accounts and users with their public keys) and the siderov1
 * check against them (siderov1.ts). Keys are indexed by lower-case fingerprint, as Omni stores
 * PublicKey resources.
 */
export class IdentityRegistry {
  private readonly identities = new Map<string, Identity>();
  private readonly keys = new Map<string, StoredKey>();
  private readonly verifier: Siderov1Verifier;

  constructor(opts: RegistryOptions = {}) {
    this.verifier = new Siderov1Verifier(opts.verifiedCacheSize);
  }

  /** Adds an identity with its keys, checked the way Omni's CreateServiceAccount checks them. */
  async add(spec: IdentitySpec): Promise<Identity> {
    const identity = identityFromSpec(spec);
    if (this.identities.has(identity.name))
      throw new IdentityError(`identity ${JSON.stringify(identity.name)} is defined twice`);
    if (spec.publicKeys.length === 0)
      throw new IdentityError(`identity ${JSON.stringify(identity.name)} has no public key`);
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
    if (existed) this.verifier.forget();
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
    return this.verifier.verifiedCacheEntries;
  }

  /**
   * Verifies a gateway request's siderov1 signature at the sim time `nowMs` and returns the caller.
   * Throws UnauthenticatedError("invalid signature"), or InternalError for a truncated siderov1 header.
   */
  async authenticate(headers: HeaderMap, fullMethod: string, nowMs: number): Promise<Identity> {
    return this.authenticateMetadata(metadataFromHeaders(headers), fullMethod, nowMs);
  }

  async authenticateMetadata(md: GrpcMetadata, fullMethod: string, nowMs: number): Promise<Identity> {
    return this.verifier.verify(md, fullMethod, nowMs, (fingerprint) => {
      // The key by fingerprint (IDs are case-sensitive), and its account.
      const key = this.keys.get(fingerprint);
      const identity = key && this.identities.get(key.identityName);
      return key && identity ? { key, identity } : undefined;
    });
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
      throw new IdentityError(
        `identity ${JSON.stringify(name)}: infra provider accounts must have role InfraProvider, not ${spec.role}`,
      );
    }
    const email = emailForIdentityName(name);
    return { name, email, role: 'InfraProvider', providerId: providerIdFromEmail(email) ?? providerId };
  }
  if (spec.role === undefined)
    throw new IdentityError(`identity ${JSON.stringify(name)} needs a role (Reader, Operator, Admin)`);
  if (spec.role === 'InfraProvider') {
    throw new IdentityError(
      `identity ${JSON.stringify(name)}: role InfraProvider is only allowed for "${PROVIDER_PREFIX}<id>" accounts`,
    );
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
    throw new IdentityError(`identity ${JSON.stringify(identityName)}: not an armored OpenPGP public key`, {
      cause: e,
    });
  }
  if (key.isPrivate())
    throw new IdentityError(
      `identity ${JSON.stringify(identityName)}: a private key was given where a public key is expected`,
    );
  const created = key.getCreationTime().getTime();
  let expiration: Date | number | null;
  try {
    expiration = await key.getExpirationTime();
  } catch (e) {
    throw new IdentityError(`identity ${JSON.stringify(identityName)}: the key has no valid self-signature`, {
      cause: e,
    });
  }
  if (!(expiration instanceof Date)) {
    throw new IdentityError(
      `identity ${JSON.stringify(identityName)}: the key must have an expiration (Omni refuses keys without one)`,
    );
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
  return (headers: HeaderMap, fullMethod: string): Promise<Identity> =>
    registry.authenticate(headers, fullMethod, clock.now());
}
