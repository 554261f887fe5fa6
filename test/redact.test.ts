// src/redact.ts: every output goes through one function that takes secrets out by value.

import { describe, expect, it } from 'vitest';
import { addSecret, redact, redactDeep } from '../src/redact.js';

/** A stand-in service-account key: base64 of {"name":...,"pgp_key":...} as omnictl prints it. */
function fakeKey(seed: string): { key: string; armored: string } {
  const body = Buffer.from(`${seed}`.repeat(40)).toString('base64');
  const lines = body.match(/.{1,64}/g)!;
  const armored =
    '-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n' + `${lines.join('\n')}\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----\n`;
  const key = Buffer.from(JSON.stringify({ name: 'infra-provider:bm', pgp_key: armored })).toString('base64');
  return { key, armored };
}

describe('redact', () => {
  const known = fakeKey('known secret material ');
  addSecret(known.key);

  it('a registered key: whole, any slice of 12 characters or more, within other text and in JSON', () => {
    expect(redact(`invalid Omni endpoint "${known.key}"`)).toBe('invalid Omni endpoint "[redacted]"');
    const slice = known.key.slice(101, 131);
    expect(redact(`--ca-file x${slice}y: ENOENT`)).not.toContain(slice.slice(0, 12));
    const line = JSON.stringify({ msg: `cannot read ${known.key.slice(7, 400)}`, n: 1 });
    const out = redact(line);
    expect(out).not.toMatch(/[A-Za-z0-9+/]{12,}/);
    expect(JSON.parse(out)).toEqual({ msg: 'cannot read [redacted]', n: 1 });
    // Its armored key's lines too.
    const armoredLine = known.armored.split('\n')[3]!;
    expect(redact(`x ${armoredLine} y`)).toBe('x [redacted] y');
  });

  it('a short key nobody registered, sharing nothing with a registered one, in a short text', () => {
    const lone = Buffer.from(JSON.stringify({ n: 'a', pgp_key: 'x'.repeat(80) })).toString('base64');
    expect(lone.length).toBeLessThan(200);
    // Found by its own pattern, not as a slice of the registered key.
    for (let i = 0; i + 12 <= lone.length; i++) expect(known.key).not.toContain(lone.slice(i, i + 12));
    expect(redact(`token ${lone} end`)).toBe('token [redacted] end');
    expect(redact(`-----BEGIN PGP MESSAGE-----\nabc`)).toBe('[redacted]');
  });

  it('a key nobody registered: a base64 run that decodes to a key, an armored block', () => {
    const other = fakeKey('unregistered ');
    expect(redact(`--id ${other.key}: no such provider`)).toBe('--id [redacted]: no such provider');
    expect(redact(`key: ${other.armored}tail`)).toBe('key: [redacted]\ntail');
    const inJson = JSON.stringify({ msg: other.armored });
    expect(JSON.parse(redact(inJson))).toEqual({ msg: '[redacted]\n' });
    // A slice of it at any alignment.
    for (const from of [1, 2, 3, 41]) expect(redact(`v=${other.key.slice(from, from + 200)}`)).toBe('v=[redacted]');
  });

  it("the password of any URL-like value, whatever its scheme, parseable or not; a user's address stays", () => {
    expect(redact('invalid Omni endpoint "htps://admin:hunter2-s3cret@omni.example.com"')).toBe(
      'invalid Omni endpoint "htps://[redacted]@omni.example.com"',
    );
    expect(redact('admin:pw/with/slashes@omni.example.com')).toBe('[redacted]@omni.example.com');
    expect(redact('proxy http://u:p@127.0.0.1:3128 and grpc://a:b@h:1')).toBe(
      'proxy http://[redacted]@127.0.0.1:3128 and grpc://[redacted]@h:1',
    );
    for (const keep of [
      'admin@example.org',
      'stub-provider: bm@ignored',
      'infra-provider:bare-metal',
      '{"level":30,"msg":"a@b"}',
      'at 12:30 on https://omni.example.com:443/x',
    ])
      expect(redact(keep)).toBe(keep);
  });

  it('a BMC password registered, and short secrets whole; JSON stays valid around escapes', () => {
    addSecret('calvin-bmc');
    expect(redact('ipmitool said: password calvin-bmc refused')).toBe('ipmitool said: password [redacted] refused');
    addSecret('p"a\\ss-word-with-quotes');
    const line = JSON.stringify({ msg: 'p"a\\ss-word-with-quotes' });
    expect(() => JSON.parse(redact(line))).not.toThrow();
    expect(redact(line)).not.toContain('ss-word-with');
  });

  it('is idempotent, leaves text without secrets alone, and redactDeep takes every string of a value', () => {
    const text = 'released InfraMachine 9b2f6a10-0c1d-4e5f-8a9b-112233445566 (bare-metal.InfraMachineController)';
    expect(redact(text)).toBe(text);
    const once = redact(`x ${known.key} y`);
    expect(redact(once)).toBe(once);
    expect(redactDeep({ a: [`k=${known.key}`, 3], b: { c: 'https://u:p@h' }, d: null })).toEqual({
      a: ['k=[redacted]', 3],
      b: { c: 'https://[redacted]@h' },
      d: null,
    });
  });
});
