import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as openpgp from 'openpgp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdentityError, IdentityRegistry } from '../../../src/omni-sim/access/identities.js';
import { metadataFromHeaders } from '../../../src/omni-sim/access/siderov1.js';
import { generateKey, type GeneratedKey } from '../../../src/omni-sim/scenario/keys.js';
import { InternalError, UnauthenticatedError } from '../../../src/omni-api/errors.js';

const METHOD = '/cosi.resource.State/Get';
const NOW = Date.now();
const nowSec = (ms = NOW): string => String(Math.floor(ms / 1000));

/** The Go signer's payload bytes: every listed header, null when absent, keys sorted. */
function goPayload(ts: string, method = METHOD, extra: Record<string, string[] | null> = {}): string {
  const headers: Record<string, string[] | null> = {
    authorization: null,
    cluster: null,
    context: null,
    fieldSelectors: null,
    namespace: null,
    nodes: null,
    runtime: null,
    selectors: null,
    uid: null,
    'x-sidero-timestamp': [ts],
    ...extra,
  };
  const sorted = Object.fromEntries(
    Object.keys(headers)
      .sort()
      .map((k) => [k, headers[k]]),
  );
  return JSON.stringify({ headers: sorted, method });
}

async function pgpSign(armoredPrivateKey: string, payload: string, date?: Date): Promise<{ sig: string; fp: string }> {
  const key = await openpgp.readPrivateKey({ armoredKey: armoredPrivateKey });
  const sig = (await openpgp.sign({
    message: await openpgp.createMessage({ binary: new TextEncoder().encode(payload) }),
    signingKeys: key,
    detached: true,
    format: 'binary',
    ...(date ? { date } : {}),
  })) as Uint8Array;
  return { sig: Buffer.from(sig).toString('base64'), fp: key.getFingerprint() };
}

function headersFor(
  name: string,
  fp: string,
  sig: string,
  ts: string,
  payload: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    'grpc-metadata-x-sidero-timestamp': ts,
    'grpc-metadata-x-sidero-payload': payload,
    'grpc-metadata-x-sidero-signature': `siderov1 ${name} ${fp} ${sig}`,
    ...extra,
  };
}

async function expectInvalid(p: Promise<unknown>): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UnauthenticatedError);
  expect((err as UnauthenticatedError).grpcCode).toBe(16);
  expect((err as UnauthenticatedError).omniMessage).toBe('invalid signature');
}

let provider: GeneratedKey;
let registry: IdentityRegistry;

beforeAll(async () => {
  provider = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 24 * 3600 });
  registry = new IdentityRegistry({ verifiedCacheSize: 3 });
  await registry.add({ name: provider.name, publicKeys: [provider.armoredPublicKey] });
});

describe('identity registry', () => {
  it('derives role, e-mail and provider ID from the name', async () => {
    expect(registry.get('infra-provider:bare-metal')).toEqual({
      name: 'infra-provider:bare-metal',
      email: 'bare-metal@infra-provider.serviceaccount.omni.sidero.dev',
      role: 'InfraProvider',
      providerId: 'bare-metal',
    });
    const admin = await generateKey('admin@example.org', { lifetimeSeconds: 3600 });
    const r = new IdentityRegistry();
    expect(await r.add({ name: 'admin@example.org', role: 'Admin', publicKeys: [admin.armoredPublicKey] })).toEqual({
      name: 'admin@example.org',
      email: 'admin@example.org',
      role: 'Admin',
    });
  });

  it('refuses as Omni: InfraProvider role without prefix, another role with it, private keys, no expiry', async () => {
    const k = await generateKey('ops@example.org', { lifetimeSeconds: 3600 });
    const r = new IdentityRegistry();
    await expect(
      r.add({ name: 'ops@example.org', role: 'InfraProvider', publicKeys: [k.armoredPublicKey] }),
    ).rejects.toBeInstanceOf(IdentityError);
    await expect(
      r.add({ name: 'infra-provider:x', role: 'Admin', publicKeys: [k.armoredPublicKey] }),
    ).rejects.toBeInstanceOf(IdentityError);
    await expect(
      r.add({ name: 'ops@example.org', role: 'Operator', publicKeys: [k.armoredPrivateKey] }),
    ).rejects.toBeInstanceOf(IdentityError);
    const { publicKey } = await openpgp.generateKey({
      type: 'ecc',
      curve: 'ed25519Legacy',
      userIDs: [{ email: 'n@example.org' }],
      format: 'armored',
    });
    await expect(r.add({ name: 'n@example.org', role: 'Reader', publicKeys: [publicKey] })).rejects.toThrow(
      /expiration/,
    );
  });
});

describe('gateway metadata', () => {
  it('strips Grpc-Metadata-, lower-cases keys, maps Authorization, drops non-ASCII values', () => {
    const md = metadataFromHeaders({
      'grpc-metadata-Nodes': ['a', 'b'],
      'Grpc-Metadata-fieldSelectors': 'x',
      authorization: 'Bearer t',
      'grpc-metadata-uid': 'caf\u00e9',
      'x-other': 'y',
    });
    expect(md.get('nodes')).toEqual(['a', 'b']);
    expect(md.get('fieldselectors')).toEqual(['x']);
    expect(md.get('authorization')).toEqual(['Bearer t']);
    expect(md.has('uid')).toBe(false);
    expect(md.has('x-other')).toBe(false);
  });
});

describe('siderov1 verification', () => {
  it('accepts a Go-style payload and a frontend-style payload; the identity field is not compared', async () => {
    const ts = nowSec();
    const p1 = goPayload(ts);
    const s1 = await pgpSign(provider.armoredPrivateKey, p1);
    expect((await registry.authenticate(headersFor('whoever', s1.fp, s1.sig, ts, p1), METHOD, NOW)).providerId).toBe(
      'bare-metal',
    );
    const p2 = JSON.stringify({ headers: { 'x-sidero-timestamp': [ts] }, method: METHOD });
    const s2 = await pgpSign(provider.armoredPrivateKey, p2);
    expect((await registry.authenticate(headersFor(provider.name, s2.fp, s2.sig, ts, p2), METHOD, NOW)).role).toBe(
      'InfraProvider',
    );
  });

  it('refuses a tampered payload, wrong method, stale or future time, unknown or upper-case fingerprint', async () => {
    const ts = nowSec();
    const p = goPayload(ts);
    const { sig, fp } = await pgpSign(provider.armoredPrivateKey, p);
    const tampered = p.replace('"uid":null', '"uid": null');
    await expectInvalid(registry.authenticate(headersFor(provider.name, fp, sig, ts, tampered), METHOD, NOW));
    await expectInvalid(
      registry.authenticate(headersFor(provider.name, fp, sig, ts, p), '/cosi.resource.State/List', NOW),
    );
    const other = goPayload(ts, '/cosi.resource.State/List');
    const so = await pgpSign(provider.armoredPrivateKey, other);
    await expectInvalid(registry.authenticate(headersFor(provider.name, fp, so.sig, ts, other), METHOD, NOW));
    // 6 minutes late, and 6 minutes early, by the sim clock
    await expectInvalid(registry.authenticate(headersFor(provider.name, fp, sig, ts, p), METHOD, NOW + 6 * 60_000));
    await expectInvalid(registry.authenticate(headersFor(provider.name, fp, sig, ts, p), METHOD, NOW - 6 * 60_000));
    // 4 minutes either way is fine
    await registry.authenticate(headersFor(provider.name, fp, sig, ts, p), METHOD, NOW + 4 * 60_000);
    const unknown = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
    const su = await pgpSign(unknown.armoredPrivateKey, p);
    await expectInvalid(registry.authenticate(headersFor(provider.name, su.fp, su.sig, ts, p), METHOD, NOW));
    await expectInvalid(registry.authenticate(headersFor(provider.name, fp.toUpperCase(), sig, ts, p), METHOD, NOW));
    // signed by another key but naming ours
    await expectInvalid(registry.authenticate(headersFor(provider.name, fp, su.sig, ts, p), METHOD, NOW));
  });

  it('compares the listed headers exactly: [] is not absent, null is; fieldSelectors reads as absent', async () => {
    const ts = nowSec();
    const check = async (
      extra: Record<string, string[] | null>,
      reqHeaders: Record<string, string> = {},
    ): Promise<boolean> => {
      const p = goPayload(ts, METHOD, extra);
      const s = await pgpSign(provider.armoredPrivateKey, p);
      return registry.authenticate(headersFor(provider.name, s.fp, s.sig, ts, p, reqHeaders), METHOD, NOW).then(
        () => true,
        (e: unknown) => {
          expect(e).toBeInstanceOf(UnauthenticatedError);
          return false;
        },
      );
    };
    expect(await check({ nodes: [] })).toBe(false);
    expect(await check({ nodes: null })).toBe(true);
    expect(await check({ nodes: ['n1'] }, { 'grpc-metadata-nodes': 'n1' })).toBe(true);
    expect(await check({}, { 'grpc-metadata-nodes': 'n1' })).toBe(false);
    expect(await check({ fieldSelectors: ['a'] }, { 'grpc-metadata-fieldselectors': 'a' })).toBe(false);
    expect(await check({}, { 'grpc-metadata-fieldselectors': 'a' })).toBe(true);
    // an HTTP Authorization header becomes signed metadata
    expect(await check({}, { authorization: 'Bearer x' })).toBe(false);
    expect(await check({ authorization: ['Bearer x'] }, { authorization: 'Bearer x' })).toBe(true);
    // a non-ASCII value is dropped by the gateway, so it reads as absent
    expect(await check({}, { 'grpc-metadata-uid': 'caf\u00e9' })).toBe(true);
  });

  it('refuses missing, other-version and bad-base64 signatures; a truncated siderov1 header is Internal', async () => {
    const ts = nowSec();
    const p = goPayload(ts);
    const { sig, fp } = await pgpSign(provider.armoredPrivateKey, p);
    const base = headersFor(provider.name, fp, sig, ts, p);
    const { 'grpc-metadata-x-sidero-signature': _omit, ...unsigned } = base;
    await expectInvalid(registry.authenticate(unsigned, METHOD, NOW));
    await expectInvalid(
      registry.authenticate(
        { ...base, 'grpc-metadata-x-sidero-signature': `siderov2 ${provider.name} ${fp} ${sig}` },
        METHOD,
        NOW,
      ),
    );
    await expectInvalid(
      registry.authenticate(
        { ...base, 'grpc-metadata-x-sidero-signature': `siderov1 ${provider.name} ${fp} ${sig.slice(0, -1)}` },
        METHOD,
        NOW,
      ),
    );
    const err = await registry
      .authenticate({ ...base, 'grpc-metadata-x-sidero-signature': `siderov1 ${provider.name} ${fp}` }, METHOD, NOW)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InternalError);
    expect((err as InternalError).grpcCode).toBe(13);
    // timestamp header must be there and match the payload
    await expectInvalid(
      registry.authenticate({ ...base, 'grpc-metadata-x-sidero-timestamp': String(Number(ts) + 1) }, METHOD, NOW),
    );
  });

  it('refuses an expired key, and retries at now + min(5 min, lifetime/2) for signers slightly ahead', async () => {
    const short = await generateKey('infra-provider:short', { lifetimeSeconds: 3600 });
    const r = new IdentityRegistry();
    await r.add({ name: short.name, publicKeys: [short.armoredPublicKey] });
    const created = (await openpgp.readKey({ armoredKey: short.armoredPublicKey })).getCreationTime().getTime();
    // Signed now (the key is valid); presented at sim times before and after the key's expiry.
    for (const [at, ok] of [
      [created + 50 * 60_000, true],
      [created + 2 * 3600_000, false],
    ] as const) {
      const p = goPayload(nowSec(at));
      const s = await pgpSign(short.armoredPrivateKey, p);
      const call = r.authenticate(headersFor(short.name, s.fp, s.sig, nowSec(at), p), METHOD, at);
      if (ok) expect((await call).name).toBe(short.name);
      else await expectInvalid(call);
    }

    const ts = nowSec();
    const p2 = goPayload(ts);
    const ahead = await pgpSign(provider.armoredPrivateKey, p2, new Date(NOW + 2 * 60_000));
    expect(
      (await registry.authenticate(headersFor(provider.name, ahead.fp, ahead.sig, ts, p2), METHOD, NOW)).name,
    ).toBe(provider.name);
    const tooFar = await pgpSign(provider.armoredPrivateKey, p2, new Date(NOW + 10 * 60_000));
    await expectInvalid(registry.authenticate(headersFor(provider.name, tooFar.fp, tooFar.sig, ts, p2), METHOD, NOW));
  });

  it('memoises verified signatures in a bounded cache without skipping the other checks', async () => {
    const r = new IdentityRegistry({ verifiedCacheSize: 2 });
    await r.add({ name: provider.name, publicKeys: [provider.armoredPublicKey] });
    const calls: Array<Record<string, string>> = [];
    for (let i = 0; i < 3; i++) {
      const ts = nowSec(NOW + i * 1000);
      const p = goPayload(ts);
      const s = await pgpSign(provider.armoredPrivateKey, p);
      calls.push(headersFor(provider.name, s.fp, s.sig, ts, p));
      await r.authenticate(calls[i]!, METHOD, NOW);
    }
    expect(r.verifiedCacheEntries).toBe(2);
    await r.authenticate(calls[2]!, METHOD, NOW);
    await expectInvalid(r.authenticate(calls[2]!, METHOD, NOW + 6 * 60_000));
    await expectInvalid(r.authenticate(calls[2]!, '/cosi.resource.State/List', NOW));
    expect(r.removeProvider('bare-metal')).toBe(true);
    await expectInvalid(r.authenticate(calls[2]!, METHOD, NOW));
  });
});

describe('a signature made by GnuPG', () => {
  let home: string;
  let gpgKey: { armored: string; fp: string };
  const gpg = (...args: string[]): string =>
    execFileSync(
      'gpg',
      ['--homedir', home, '--batch', '--yes', '--no-tty', '--pinentry-mode', 'loopback', '--passphrase', '', ...args],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );

  beforeAll(() => {
    home = mkdtempSync(join(tmpdir(), 'sim-auth-gpg-'));
    gpg(
      '--quick-gen-key',
      'gpg-provider (test) <gpg-provider@infra-provider.serviceaccount.omni.sidero.dev>',
      'ed25519',
      'sign',
      '1d',
    );
    const fpr = gpg('--with-colons', '--list-keys')
      .split('\n')
      .find((l) => l.startsWith('fpr:'));
    gpgKey = { armored: gpg('--armor', '--export'), fp: (fpr ?? '').split(':')[9] ?? '' };
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('is accepted, and refused once the payload is tampered with', async () => {
    const r = new IdentityRegistry();
    await r.add({ name: 'infra-provider:gpg-provider', publicKeys: [gpgKey.armored] });
    expect(r.fingerprints('infra-provider:gpg-provider')).toEqual([gpgKey.fp.toLowerCase()]);
    const ts = nowSec();
    const payload = goPayload(ts, '/cosi.resource.State/Watch');
    const file = join(home, 'payload.json');
    writeFileSync(file, payload);
    gpg('--detach-sign', '--output', `${file}.sig`, file);
    const sig = readFileSync(`${file}.sig`).toString('base64');
    const headers = headersFor('infra-provider:gpg-provider', gpgKey.fp.toLowerCase(), sig, ts, payload);
    const who = await r.authenticate(headers, '/cosi.resource.State/Watch', NOW);
    expect(who.providerId).toBe('gpg-provider');
    await expectInvalid(
      r.authenticate(
        { ...headers, 'grpc-metadata-x-sidero-payload': payload.replace('Watch', 'Get') },
        '/cosi.resource.State/Get',
        NOW,
      ),
    );
    await expectInvalid(r.authenticate(headers, '/cosi.resource.State/Get', NOW));
    // the key expires after a day
    await expectInvalid(r.authenticate(headers, '/cosi.resource.State/Watch', NOW + 2 * 24 * 3600_000));
  });
});
