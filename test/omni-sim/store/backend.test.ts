// How the sim words its store's answers by where Omni keeps the kind (src/omni-sim/store/backend.ts): etcd
// (as the real-Omni recordings show), in memory, and the controllers' cache; Go's %q.

import { describe, expect, it } from 'vitest';
import type { Resource } from '../../../src/omni-api/resource.js';
import { newMetadata } from '../../../src/omni-api/resource.js';
import type { Identity } from '../../../src/omni-sim/api.js';
import { backendOf, goQuote, goQuoteRune } from '../../../src/omni-sim/store/backend.js';
import { SimStore } from '../../../src/omni-sim/store/store.js';

const who: Identity = { name: 't', email: 't', role: 'Admin', internal: true };
const res = (namespace: string, type: string, id: string, init: Partial<Resource['metadata']> = {}): Resource => ({
  metadata: newMetadata({ namespace, type, id }, init),
  spec: { protoSpec: new Uint8Array(0) },
});

describe("Go's %q", () => {
  it('prints an integer as its character literal (strconv.QuoteRune)', () => {
    expect([0n, 1n, 7n, 8n, 9n, 10n, 11n, 12n, 13n, 27n, 31n].map(goQuoteRune)).toEqual([
      "'\\x00'",
      "'\\x01'",
      "'\\a'",
      "'\\b'",
      "'\\t'",
      "'\\n'",
      "'\\v'",
      "'\\f'",
      "'\\r'",
      "'\\x1b'",
      "'\\x1f'",
    ]);
    expect([32n, 39n, 48n, 65n, 92n, 126n, 127n].map(goQuoteRune)).toEqual([
      "' '",
      "'\\''",
      "'0'",
      "'A'",
      "'\\\\'",
      "'~'",
      "'\\x7f'",
    ]);
    expect([0x80n, 0xa0n, 0xe9n, 0x2028n, 0x1f600n].map(goQuoteRune)).toEqual([
      "'\\u0080'",
      "'\\u00a0'",
      "'é'",
      "'\\u2028'",
      "'😀'",
    ]);
    // Not a code point: the replacement character.
    expect([0xd800n, 0x110000n, -1n].map(goQuoteRune)).toEqual(["'\uFFFD'", "'\uFFFD'", "'\uFFFD'"]);
  });

  it('quotes a string like strconv.Quote', () => {
    expect(goQuote('rec.MachineStatusController')).toBe('"rec.MachineStatusController"');
    expect(goQuote('a"b\\c\nd\u0000\u007f\u00e9')).toBe('"a\\"b\\\\c\\nd\\x00\\x7fé"');
  });
});

describe('where Omni keeps a kind', () => {
  it('memory for ephemeral, meta and provider health statuses; etcd for the rest', () => {
    expect(backendOf({ namespace: 'ephemeral', type: 'SysVersions.system.sidero.dev' })).toBe('inmem');
    expect(backendOf({ namespace: 'meta', type: 'Namespaces.meta.cosi.dev' })).toBe('inmem');
    expect(
      backendOf({ namespace: 'infra-provider-ephemeral', type: 'InfraProviderHealthStatuses.omni.sidero.dev' }),
    ).toBe('inmem');
    expect(backendOf({ namespace: 'infra-provider-ephemeral', type: 'MachineRequestStatuses.omni.sidero.dev' })).toBe(
      'etcd',
    );
    expect(backendOf({ namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev' })).toBe('etcd');
    expect(backendOf({ namespace: 'infra-provider:rec', type: 'MachineStatus.rec.infraprovider.sidero.dev' })).toBe(
      'etcd',
    );
  });

  it('an in-memory kind answers without the "failed to <op>:" prefix, versions as strings, owner checked first', () => {
    const store = new SimStore({ clock: { now: () => 0 } });
    const T = 'InfraProviderHealthStatuses.omni.sidero.dev';
    const NS = 'infra-provider-ephemeral';
    const ptr = { namespace: NS, type: T, id: 'p' };
    expect(() => store.get(who, ptr)).toThrow(
      expect.objectContaining({ grpcCode: 5, omniMessage: `resource ${T}(${NS}/p@undefined) doesn't exist` }),
    );
    const c = store.create(who, res(NS, T, 'p', { finalizers: ['f'] }), 'o');
    expect(() => store.create(who, res(NS, T, 'p'), 'o')).toThrow(
      expect.objectContaining({ grpcCode: 6, omniMessage: `resource ${T}(${NS}/p@undefined) already exists` }),
    );
    const stale = { ...c, metadata: { ...c.metadata, version: '7' } };
    expect(() => store.update(who, stale, 'x')).toThrow(
      expect.objectContaining({ grpcCode: 7, omniMessage: `resource ${T}(${NS}/p@1) is owned by "o"` }),
    );
    expect(() => store.update(who, stale, 'o')).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage: `resource ${T}(${NS}/p@1) update conflict: expected version "7", actual version "1"`,
      }),
    );
    expect(() => store.destroy(who, ptr, 'o')).toThrow(
      expect.objectContaining({ grpcCode: 9, omniMessage: `resource ${T}(${NS}/p@1) has pending finalizers &[f]` }),
    );
  });

  it('an etcd kind names the operation, prints versions with %q and checks the version before the owner', () => {
    const store = new SimStore({ clock: { now: () => 0 } });
    const T = 'MachineStatus.rec.infraprovider.sidero.dev';
    const NS = 'infra-provider:rec';
    const c = store.create(who, res(NS, T, 'm', { finalizers: ['a', 'b'] }), 'o');
    expect(() => store.update(who, { ...c, metadata: { ...c.metadata, version: '65' } }, 'x')).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage:
          `failed to update: resource ${T}(${NS}/m@1) update conflict: expected version 'A', actual ` +
          `version '\\x01'`,
      }),
    );
    expect(() =>
      store.update(who, { ...res(NS, T, 'gone'), metadata: { ...res(NS, T, 'gone').metadata, version: '3' } }, 'o'),
    ).toThrow(
      expect.objectContaining({
        grpcCode: 5,
        omniMessage: `failed to update: resource ${T}(${NS}/gone@3) doesn't exist`,
      }),
    );
    expect(() => store.destroy(who, c.metadata, 'x')).toThrow(
      expect.objectContaining({
        grpcCode: 7,
        omniMessage: `failed to destroy: resource ${T}(${NS}/m@1) is owned by "o"`,
      }),
    );
    expect(() => store.destroy(who, c.metadata, 'o')).toThrow(
      expect.objectContaining({
        grpcCode: 9,
        omniMessage: `failed to destroy: resource ${T}(${NS}/m@1) has pending finalizers &[a b]`,
      }),
    );
    expect(() => store.destroy(who, { namespace: NS, type: T, id: 'gone' }, 'o')).toThrow(
      expect.objectContaining({
        grpcCode: 5,
        omniMessage: `failed to destroy: resource ${T}(${NS}/gone@undefined) doesn't exist`,
      }),
    );
  });
});
