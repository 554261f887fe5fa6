import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as openpgp from 'openpgp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  HEADER_PAYLOAD,
  HEADER_SIGNATURE,
  HEADER_TIMESTAMP,
  Signer,
  keyFromEnv,
  loadServiceAccountKey,
  parseServiceAccountKey,
  signaturePayload,
} from '../../../src/omni-client/transport/auth.js';
import { KeyError } from '../../../src/omni-client/errors.js';
import { generateKey, type GeneratedKey } from '../../../src/omni-sim/scenario/keys.js';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const blob = (o: unknown): string => b64(JSON.stringify(o));

let key: GeneratedKey;
beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});

async function verify(publicArmored: string, payload: string, sigB64: string): Promise<boolean> {
  const result = await openpgp.verify({
    message: await openpgp.createMessage({ binary: new TextEncoder().encode(payload) }),
    signature: await openpgp.readSignature({ binarySignature: Buffer.from(sigB64, 'base64') }),
    verificationKeys: await openpgp.readKey({ armoredKey: publicArmored }),
    expectSigned: false,
  });
  try {
    await result.signatures[0]?.verified;
    return true;
  } catch {
    return false;
  }
}

describe('parseServiceAccountKey', () => {
  it('reads an omnictl key: name, provider ID, lowercase 40-hex fingerprint, expiry', async () => {
    const k = await parseServiceAccountKey(key.serviceAccountKey);
    expect(k.name).toBe('infra-provider:bare-metal');
    expect(k.providerId).toBe('bare-metal');
    expect(k.fingerprint).toMatch(/^[0-9a-f]{40}$/);
    expect(k.fingerprint).toBe(key.fingerprint);
    expect(k.expiresAt?.getTime()).toBeGreaterThan(Date.now());
  });

  it('accepts a key pasted with line breaks', async () => {
    const wrapped = key.serviceAccountKey.replace(/(.{76})/g, '$1\n');
    expect((await parseServiceAccountKey(wrapped)).providerId).toBe('bare-metal');
  });

  const cases: [string, () => string | Promise<string>, RegExp][] = [
    ['not base64', () => 'this is not base64!', /not base64/],
    ['empty', () => '   ', /not base64/],
    ['base64 of something that is not JSON', () => b64('hello, world'), /not JSON/],
    ['JSON that is not an object', () => blob(['a']), /not a JSON object/],
    ['no name', () => blob({ pgp_key: key.armoredPrivateKey }), /no "name"/],
    [
      'a user service account',
      () => blob({ name: 'automation', pgp_key: key.armoredPrivateKey }),
      /not to an infra provider.*infra-provider:<id>/,
    ],
    [
      'an empty provider ID',
      () => blob({ name: 'infra-provider:', pgp_key: key.armoredPrivateKey }),
      /not to an infra provider/,
    ],
    ['no pgp_key', () => blob({ name: 'infra-provider:x' }), /no "pgp_key"/],
    [
      'an armored public key',
      () => blob({ name: 'infra-provider:x', pgp_key: key.armoredPublicKey }),
      /is a public key/,
    ],
    [
      'garbage instead of a key',
      () => blob({ name: 'infra-provider:x', pgp_key: 'hello' }),
      /not an armored OpenPGP private key/,
    ],
    [
      'a key encrypted with a passphrase',
      async () => {
        const priv = await openpgp.readPrivateKey({ armoredKey: key.armoredPrivateKey });
        const enc = await openpgp.encryptKey({ privateKey: priv, passphrase: 'secret' });
        return blob({ name: 'infra-provider:x', pgp_key: enc.armor() });
      },
      /encrypted with a passphrase/,
    ],
  ];
  for (const [what, make, msg] of cases) {
    it(`refuses ${what} with a KeyError`, async () => {
      const input = await make();
      const err = await parseServiceAccountKey(input).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(KeyError);
      expect((err as KeyError).code).toBe('STUB_KEY_INVALID');
      expect((err as Error).message).toMatch(msg);
      // the key material never appears in the message
      expect((err as Error).message).not.toContain('BEGIN PGP');
      expect((err as Error).message).not.toContain(key.serviceAccountKey.slice(0, 40));
    });
  }

  it('refuses an expired key, saying when it expired and how to renew', async () => {
    const err = await parseServiceAccountKey(key.serviceAccountKey, { now: () => Date.now() + 2 * 3600_000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(KeyError);
    expect((err as Error).message).toMatch(/expired on \d{4}-.*renewkey bare-metal/);
  });
});

describe('loading the key', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stub-auth-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('checks SIDERO_SERVICE_ACCOUNT_KEY before OMNI_SERVICE_ACCOUNT_KEY, like the Go library', async () => {
    const other = await generateKey('infra-provider:other');
    const env = {
      OMNI_SERVICE_ACCOUNT_KEY: key.serviceAccountKey,
      SIDERO_SERVICE_ACCOUNT_KEY: other.serviceAccountKey,
    };
    expect(keyFromEnv(env)?.source).toBe('SIDERO_SERVICE_ACCOUNT_KEY');
    expect((await loadServiceAccountKey({ env })).providerId).toBe('other');
    expect((await loadServiceAccountKey({ env: { OMNI_SERVICE_ACCOUNT_KEY: key.serviceAccountKey } })).providerId).toBe(
      'bare-metal',
    );
  });

  it('names the variable in errors, and asks for a key when none is set', async () => {
    await expect(loadServiceAccountKey({ env: { OMNI_SERVICE_ACCOUNT_KEY: 'nope!' } })).rejects.toThrow(
      /OMNI_SERVICE_ACCOUNT_KEY is not base64/,
    );
    await expect(loadServiceAccountKey({ env: {} })).rejects.toThrow(
      /no service account key: set SIDERO_SERVICE_ACCOUNT_KEY or OMNI_SERVICE_ACCOUNT_KEY/,
    );
  });

  it('reads a key file, and says so when it cannot', async () => {
    const file = join(dir, 'key');
    await writeFile(file, `${key.serviceAccountKey}\n`);
    expect((await loadServiceAccountKey({ file, env: {} })).fingerprint).toBe(key.fingerprint);
    await expect(loadServiceAccountKey({ file: join(dir, 'missing'), env: {} })).rejects.toThrow(
      /cannot read the service account key file .*ENOENT/,
    );
  });
});

describe('Signer (siderov1)', () => {
  it('signs the exact payload bytes it sends, verifiable with the public key', async () => {
    const k = await parseServiceAccountKey(key.serviceAccountKey);
    const ts = Math.floor(Date.now() / 1000);
    const h = await new Signer(k).headers('/cosi.resource.State/Get', ts);
    expect(h[HEADER_TIMESTAMP]).toBe(String(ts));
    const payload = h[HEADER_PAYLOAD] ?? '';
    expect(payload).toBe(`{"headers":{"x-sidero-timestamp":["${ts}"]},"method":"/cosi.resource.State/Get"}`);
    expect(payload).toBe(signaturePayload('/cosi.resource.State/Get', ts));
    const fields = (h[HEADER_SIGNATURE] ?? '').split(' ');
    expect(fields).toHaveLength(4);
    expect(fields[0]).toBe('siderov1');
    expect(fields[1]).toBe('infra-provider:bare-metal');
    expect(fields[2]).toMatch(/^[0-9a-f]{40}$/);
    expect(fields[2]).toBe(key.fingerprint);
    expect(await verify(key.armoredPublicKey, payload, fields[3] ?? '')).toBe(true);
    // the signature covers the method: the same signature over another method's payload fails
    expect(
      await verify(key.armoredPublicKey, signaturePayload('/cosi.resource.State/Update', ts), fields[3] ?? ''),
    ).toBe(false);
    // a binary (not armored) detached signature
    const sig = await openpgp.readSignature({ binarySignature: Buffer.from(fields[3] ?? '', 'base64') });
    expect(sig.packets[0]?.signatureType).toBe(openpgp.enums.signature.binary);
    expect(Object.keys(h).some((n) => n.toLowerCase() === 'authorization')).toBe(false);
  });

  it('hands out a signature already made without a promise, the same headers as `headers`', async () => {
    const signer = new Signer(await parseServiceAccountKey(key.serviceAccountKey));
    const ts = Math.floor(Date.now() / 1000);
    expect(signer.ready('/cosi.resource.State/Update', ts)).toBeUndefined();
    const pending = signer.headers('/cosi.resource.State/Update', ts);
    expect(signer.ready('/cosi.resource.State/Update', ts)).toBeUndefined();
    const h = await pending;
    expect(signer.ready('/cosi.resource.State/Update', ts)).toBe(h);
    // Another method, or another second, is its own signature.
    expect(signer.ready('/cosi.resource.State/Get', ts)).toBeUndefined();
    expect(signer.ready('/cosi.resource.State/Update', ts + 1)).toBeUndefined();
    // Only the last two seconds are kept.
    await signer.headers('/cosi.resource.State/Update', ts + 2);
    expect(signer.ready('/cosi.resource.State/Update', ts)).toBeUndefined();
    expect(signer.stats().signOps).toBe(2);
  });

  it('signs once per method and second, however many calls', async () => {
    const signer = new Signer(await parseServiceAccountKey(key.serviceAccountKey));
    const ts = Math.floor(Date.now() / 1000);
    const many = await Promise.all(Array.from({ length: 50 }, () => signer.headers('/cosi.resource.State/Update', ts)));
    expect(signer.stats().signOps).toBe(1);
    expect(new Set(many.map((h) => h[HEADER_SIGNATURE])).size).toBe(1);
    await signer.headers('/cosi.resource.State/Get', ts);
    expect(signer.stats().signOps).toBe(2);
    await signer.headers('/cosi.resource.State/Update', ts + 1);
    await signer.headers('/cosi.resource.State/Update', ts);
    expect(signer.stats().signOps).toBe(3);
    await signer.headers('/cosi.resource.State/Update', ts + 3);
    await signer.headers('/cosi.resource.State/Update', ts);
    expect(signer.stats().signOps).toBe(5);
  });
});
