// Key pairs the way `omnictl infraprovider create` makes them (docs/omni-wire.md 3.1): an OpenPGP v4 key,
// EdDSA legacy (Ed25519), with an expiry, user ID `<id> (<comment>) <<email>>`; handed out as
// OMNI_SERVICE_ACCOUNT_KEY = standard base64 of JSON {"name","pgp_key"}.
// Used by the sim (identities without a public key in the scenario) and by tests; never by the stub.

import * as openpgp from 'openpgp';

export const PROVIDER_EMAIL_DOMAIN = 'infra-provider.serviceaccount.omni.sidero.dev';

export interface GeneratedKey {
  /** The identity name, e.g. `infra-provider:bare-metal`. */
  name: string;
  armoredPrivateKey: string;
  armoredPublicKey: string;
  /** 40 lower-case hex characters. */
  fingerprint: string;
  /** The value of OMNI_SERVICE_ACCOUNT_KEY. */
  serviceAccountKey: string;
}

export interface GenerateKeyOptions {
  /** Key lifetime in seconds; Omni requires one and caps it at 365 days. Default 365 days. */
  lifetimeSeconds?: number;
  /** Creation time (for expired-key tests). Default now. */
  date?: Date;
}

/** The e-mail Omni stores for an identity name (`infra-provider:<id>` -> `<id>@infra-provider...`). */
export function emailForIdentityName(name: string): string {
  if (name.startsWith('infra-provider:')) return `${name.slice('infra-provider:'.length)}@${PROVIDER_EMAIL_DOMAIN}`;
  return name.includes('@') ? name : `${name}@serviceaccount.omni.sidero.dev`;
}

export async function generateKey(name: string, opts: GenerateKeyOptions = {}): Promise<GeneratedKey> {
  const email = emailForIdentityName(name);
  const base = name.startsWith('infra-provider:') ? name.slice('infra-provider:'.length) : (name.split('@')[0] ?? name);
  const { privateKey, publicKey } = await openpgp.generateKey({
    type: 'ecc',
    curve: 'ed25519Legacy',
    userIDs: [{ name: base, comment: 'linux/amd64', email }],
    keyExpirationTime: opts.lifetimeSeconds ?? 365 * 24 * 3600,
    ...(opts.date ? { date: opts.date } : {}),
    format: 'armored',
  });
  const key = await openpgp.readKey({ armoredKey: publicKey });
  const serviceAccountKey = Buffer.from(JSON.stringify({ name, pgp_key: privateKey }), 'utf8').toString('base64');
  return {
    name,
    armoredPrivateKey: privateKey,
    armoredPublicKey: publicKey,
    fingerprint: key.getFingerprint(),
    serviceAccountKey,
  };
}
