// kind-store.ts compares the versions of what it holds and what comes without a BigInt each: the
// comparison must order them exactly as safeVersion does, for every version Omni writes and any other.
import { describe, expect, it } from 'vitest';
import { safeVersion, versionAtLeast } from '../../../src/provider/read/kind-store.js';

describe('versionAtLeast', () => {
  it('orders versions exactly as safeVersion does', () => {
    const versions = [
      ...['0', '1', '2', '9', '10', '11', '99', '100', '007', '0010', '999999999999999'],
      ...['1000000000000000', '9007199254740993', '9007199254740992', '18446744073709551615'],
      ...['undefined', '', ' 1', '1 ', '1e3', '0x10', '-1', '1.5', 'abc'],
    ];
    for (const a of versions)
      for (const b of versions) expect([a, b, versionAtLeast(a, b)]).toEqual([a, b, safeVersion(a) >= safeVersion(b)]);
  });
});
