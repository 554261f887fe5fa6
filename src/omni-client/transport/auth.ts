// Service account keys and siderov1 request signatures (docs/omni-wire.md 3).
//
// The key is what `omnictl infraprovider create` prints as OMNI_SERVICE_ACCOUNT_KEY: standard base64
// of JSON {"name":"infra-provider:<id>","pgp_key":"<armored private key>"}. Every call is signed with
// a detached binary OpenPGP signature over a small JSON payload naming the method and the timestamp
// (seconds). The body is not covered, so one signature serves every call of a method within the
// same second: at 10k machines that turns thousands of EdDSA signatures a second into a handful.

import * as openpgp from 'openpgp';
import { KeyError } from '../errors.js';
import { InputFileError, KEY_FILE_MAX_BYTES, readBoundedFile } from '../../omni-api/bounded-file.js';

export const ENV_KEY_NAMES = ['SIDERO_SERVICE_ACCOUNT_KEY', 'OMNI_SERVICE_ACCOUNT_KEY'] as const;
export const PROVIDER_NAME_PREFIX = 'infra-provider:';

export const HEADER_TIMESTAMP = 'Grpc-Metadata-x-sidero-timestamp';
export const HEADER_PAYLOAD = 'Grpc-Metadata-x-sidero-payload';
export const HEADER_SIGNATURE = 'Grpc-Metadata-x-sidero-signature';

export interface ServiceAccountKey {
  /** The identity name from the key blob, `infra-provider:<id>`. */
  name: string;
  /** `<id>` of the name. */
  providerId: string;
  /** 40 lower-case hex characters: the ID of the PublicKeys resource Omni looks the key up by. */
  fingerprint: string;
  /** When the key expires (absent if it never does; Omni refuses such keys, we leave that to Omni). */
  expiresAt?: Date;
  /** Where it came from, for messages: an env var name or a file path (never the value). */
  source: string;
  privateKey: openpgp.PrivateKey;
}

export interface KeySource {
  /** The base64 blob itself (takes precedence). */
  value?: string;
  /** A file holding the base64 blob. */
  file?: string;
  /** Where to look for SIDERO_SERVICE_ACCOUNT_KEY / OMNI_SERVICE_ACCOUNT_KEY; default process.env. */
  env?: NodeJS.ProcessEnv;
  now?: () => number;
  /** Told the key file's text once it is read (redact.ts: it is a secret wherever it shows up). */
  onSecret?: (text: string) => void;
}

/** Finds the key like the Go library does: SIDERO_SERVICE_ACCOUNT_KEY first, then OMNI_SERVICE_ACCOUNT_KEY. */
export function keyFromEnv(env: NodeJS.ProcessEnv = process.env): { value: string; source: string } | undefined {
  for (const name of ENV_KEY_NAMES) {
    const v = env[name];
    if (v !== undefined && v.trim() !== '') return { value: v, source: name };
  }
  return undefined;
}

export async function loadServiceAccountKey(src: KeySource = {}): Promise<ServiceAccountKey> {
  const now = src.now ?? Date.now;
  if (src.value !== undefined) return parseServiceAccountKey(src.value, { source: 'the given key', now });
  if (src.file !== undefined) {
    let text: string;
    try {
      text = readBoundedFile(src.file, { what: '--service-account-key-file', maxBytes: KEY_FILE_MAX_BYTES });
    } catch (e) {
      if (e instanceof InputFileError) throw e;
      throw new KeyError(
        `cannot read the service account key file ${src.file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`,
      );
    }
    src.onSecret?.(text);
    return parseServiceAccountKey(text, { source: src.file, now });
  }
  const fromEnv = keyFromEnv(src.env);
  if (!fromEnv) {
    throw new KeyError(
      `no service account key: set ${ENV_KEY_NAMES.join(' or ')} (as printed by \`omnictl infraprovider create ` +
        `<id>\`), or give a key file`,
    );
  }
  return parseServiceAccountKey(fromEnv.value, { source: fromEnv.source, now });
}

const BASE64_RE = /^[A-Za-z0-9+/]+={0,2}$/;

/** Parses and checks a service account key; each way it can be wrong has its own message. */
export async function parseServiceAccountKey(
  blob: string,
  opts: { source?: string; now?: () => number } = {},
): Promise<ServiceAccountKey> {
  const source = opts.source ?? 'the service account key';
  const now = opts.now ?? Date.now;
  const compact = blob.replace(/\s+/g, '');
  if (compact === '' || compact.length % 4 === 1 || !BASE64_RE.test(compact)) {
    throw new KeyError(
      `${source} is not base64: expected the OMNI_SERVICE_ACCOUNT_KEY value printed by \`omnictl infraprovider ` +
        `create\``,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(compact, 'base64').toString('utf8'));
  } catch {
    throw new KeyError(`${source} is base64 but not JSON: expected base64 of {"name":...,"pgp_key":...}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new KeyError(`${source} is not a JSON object: expected base64 of {"name":...,"pgp_key":...}`);
  }
  const { name, pgp_key: armored } = json as { name?: unknown; pgp_key?: unknown };
  if (typeof name !== 'string' || name === '') throw new KeyError(`${source} has no "name"`);
  if (!name.startsWith(PROVIDER_NAME_PREFIX) || name.length === PROVIDER_NAME_PREFIX.length) {
    throw new KeyError(
      `${source} belongs to "${name}", not to an infra provider: the name must be "${PROVIDER_NAME_PREFIX}<id>" ` +
        `(create it with \`omnictl infraprovider create <id>\`)`,
    );
  }
  // The name travels in a header with space-separated fields: printable ASCII without spaces only.
  if (!/^[\x21-\x7e]+$/.test(name))
    throw new KeyError(`${source}: the name "${name}" contains characters that cannot be sent in a header`);
  if (typeof armored !== 'string' || armored.trim() === '') throw new KeyError(`${source} has no "pgp_key"`);

  const privateKey = await readPrivate(armored, source);
  if (!privateKey.isDecrypted()) {
    throw new KeyError(
      `${source}: the private key is encrypted with a passphrase; Omni service account keys are not, use the key as ` +
        `printed by omnictl`,
    );
  }
  const nowDate = new Date(now());
  if (await privateKey.isRevoked(undefined, undefined, nowDate)) throw new KeyError(`${source}: the key is revoked`);
  const exp = await privateKey.getExpirationTime();
  const expiresAt = exp instanceof Date ? exp : undefined;
  if (expiresAt && expiresAt.getTime() <= nowDate.getTime()) {
    throw new KeyError(
      `${source}: the key of "${name}" expired on ${expiresAt.toISOString()}; make a new one with \`omnictl ` +
        `infraprovider renewkey ${name.slice(PROVIDER_NAME_PREFIX.length)}\``,
    );
  }
  try {
    await privateKey.getSigningKey(undefined, nowDate);
  } catch (e) {
    throw new KeyError(`${source}: the key cannot sign: ${(e as Error).message}`);
  }
  return {
    name,
    providerId: name.slice(PROVIDER_NAME_PREFIX.length),
    fingerprint: privateKey.getFingerprint().toLowerCase(),
    ...(expiresAt ? { expiresAt } : {}),
    source,
    privateKey,
  };
}

async function readPrivate(armored: string, source: string): Promise<openpgp.PrivateKey> {
  try {
    return await openpgp.readPrivateKey({ armoredKey: armored });
  } catch (e) {
    let isPublic = false;
    try {
      isPublic = !(await openpgp.readKey({ armoredKey: armored })).isPrivate();
    } catch {
      // neither form: fall through to the generic message
    }
    if (isPublic)
      throw new KeyError(`${source}: "pgp_key" is a public key; the service account key must hold the private key`);
    throw new KeyError(`${source}: "pgp_key" is not an armored OpenPGP private key (${(e as Error).message})`);
  }
}

/** The exact payload bytes that are signed and sent (the frontend's form: present headers only). */
export function signaturePayload(fullMethod: string, timestampSec: number): string {
  return JSON.stringify({ headers: { 'x-sidero-timestamp': [String(timestampSec)] }, method: fullMethod });
}

/** One signature of a method and a second: in flight, then made (`value`). */
interface Signed {
  headers: Promise<Record<string, string>>;
  value: Record<string, string> | undefined;
}

export interface SignerStats {
  /** OpenPGP signing operations made (the expensive part). */
  signOps: number;
}

/**
 * Makes the three siderov1 headers, caching one signature per (method, second). Concurrent calls
 * share the signing in flight. Only the last two seconds are kept.
 */
export class Signer {
  readonly name: string;
  readonly fingerprint: string;
  #key: openpgp.PrivateKey;
  /** By second, then by method: no key string built per call. */
  #cache = new Map<number, Map<string, Signed>>();
  #newestSecond = -1;
  #signOps = 0;

  constructor(key: Pick<ServiceAccountKey, 'name' | 'fingerprint' | 'privateKey'>) {
    this.name = key.name;
    this.fingerprint = key.fingerprint;
    this.#key = key.privateKey;
  }

  stats(): SignerStats {
    return { signOps: this.#signOps };
  }

  /** Headers for a call of `fullMethod` (e.g. `/cosi.resource.State/Get`) at `timestampSec`. */
  headers(fullMethod: string, timestampSec: number): Promise<Record<string, string>> {
    return this.#entry(fullMethod, timestampSec).headers;
  }

  /**
   * The headers of `headers`, when that signature is made already (most calls: one signature serves a
   * method for a second); undefined otherwise. A call that has them sends without waiting a turn.
   */
  ready(fullMethod: string, timestampSec: number): Record<string, string> | undefined {
    return this.#cache.get(timestampSec)?.get(fullMethod)?.value;
  }

  #entry(fullMethod: string, timestampSec: number): Signed {
    if (timestampSec > this.#newestSecond) {
      this.#newestSecond = timestampSec;
      // Keep the previous second too: calls straddling a second boundary must not evict each other.
      for (const second of this.#cache.keys()) if (second < timestampSec - 1) this.#cache.delete(second);
    }
    let bySecond = this.#cache.get(timestampSec);
    if (!bySecond) {
      bySecond = new Map();
      this.#cache.set(timestampSec, bySecond);
    }
    let entry = bySecond.get(fullMethod);
    if (!entry) {
      const mine: Signed = { headers: this.#sign(fullMethod, timestampSec), value: undefined };
      entry = mine;
      bySecond.set(fullMethod, mine);
      const seconds = bySecond;
      mine.headers.then(
        (h) => {
          mine.value = h;
        },
        () => {
          if (seconds.get(fullMethod) === mine) seconds.delete(fullMethod);
        },
      );
    }
    return entry;
  }

  async #sign(fullMethod: string, timestampSec: number): Promise<Record<string, string>> {
    this.#signOps++;
    const payload = signaturePayload(fullMethod, timestampSec);
    // The signature's creation time follows the (possibly server-adjusted) timestamp: Omni verifies
    // at its own "now", and a signature from the future is refused. It cannot precede the key itself.
    const date = new Date(Math.max(timestampSec * 1000, this.#key.getCreationTime().getTime()));
    let signature: Uint8Array;
    try {
      signature = await openpgp.sign({
        message: await openpgp.createMessage({ binary: new TextEncoder().encode(payload) }),
        signingKeys: this.#key,
        detached: true,
        format: 'binary',
        date,
      });
    } catch (e) {
      throw new KeyError(
        `cannot sign ${fullMethod} with the key of "${this.name}" (fingerprint ${this.fingerprint}) at ` +
          `${date.toISOString()}: ${(e as Error).message}`,
      );
    }
    return {
      [HEADER_TIMESTAMP]: String(timestampSec),
      [HEADER_PAYLOAD]: payload,
      [HEADER_SIGNATURE]: `siderov1 ${this.name} ${this.fingerprint} ${Buffer.from(signature).toString('base64')}`,
    };
  }
}
