import * as openpgp from 'openpgp';
import { describe, expect, it } from 'vitest';
import { generateKey } from '../../../src/omni-sim/scenario/keys.js';

describe('generateKey (omnictl-style keys)', () => {
  it('makes a v4 EdDSA-legacy key with an expiry, packed as OMNI_SERVICE_ACCOUNT_KEY', async () => {
    const k = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
    expect(k.fingerprint).toMatch(/^[0-9a-f]{40}$/);
    const blob = JSON.parse(Buffer.from(k.serviceAccountKey, 'base64').toString('utf8')) as {
      name: string;
      pgp_key: string;
    };
    expect(blob.name).toBe('infra-provider:bare-metal');
    const priv = await openpgp.readPrivateKey({ armoredKey: blob.pgp_key });
    expect(priv.keyPacket.version).toBe(4);
    expect(priv.getAlgorithmInfo().algorithm).toBe('eddsaLegacy');
    const exp = await priv.getExpirationTime();
    expect(exp).toBeInstanceOf(Date);
    expect((await priv.getPrimaryUser()).user.userID?.email).toBe(
      'bare-metal@infra-provider.serviceaccount.omni.sidero.dev',
    );
  });
});
