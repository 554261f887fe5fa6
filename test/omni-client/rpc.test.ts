// Every State RPC against a scripted loopback gateway: what goes on the wire, what comes back.

import * as openpgp from 'openpgp';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import { FailedPreconditionError, NotFoundError, PermissionDeniedError } from '../../src/omni-api/errors.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import {
  noDelay,
  res,
  sendJson,
  startFakeGateway,
  LineWriter,
  wireResource,
  type FakeGateway,
} from '../helpers/fake-gateway.js';

let key: GeneratedKey;
let gw: FakeGateway;
let client: OmniClient;

beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});
beforeEach(async () => {
  gw = await startFakeGateway();
  client = await createOmniClient({ endpoint: gw.url, key: key.serviceAccountKey, delay: noDelay, env: {} });
});
afterEach(async () => {
  await client.close();
  await gw.close();
});

const ptr = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' };
const conflict = (r: Parameters<typeof sendJson>[0]) =>
  sendJson(r, 400, { code: 9, message: 'resource m1 update conflict: expected version "1", actual version "2"' });

function newResourceOf(body: Record<string, unknown>): Record<string, unknown> {
  return body['new_resource'] as Record<string, unknown>;
}

describe('Get', () => {
  it('sends the pointer, signed, no gzip asked for a unary call, no Authorization; decodes the resource', async () => {
    const r = res(
      'm1',
      {
        owner: 'bare-metal.InfraMachineController',
        finalizers: ['bare-metal.InfraMachineController'],
        labels: { a: 'b' },
      },
      new Uint8Array([10, 3, 97, 98, 99, 0xff]),
    );
    r.spec.yamlSpec = 'a: b\n';
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(r) }));
    const got = await client.state.get(ptr);
    expect(got).toEqual(r);

    const [q] = gw.calls('Get');
    expect(q?.path).toBe('/api/cosi.resource.State/Get');
    expect(q?.body).toEqual({
      namespace: 'infra-provider',
      type: 'InfraMachines.omni.sidero.dev',
      id: 'm1',
      options: {},
    });
    // gzip is asked for on streams only by default (transport.ts `gzip`): a unary body is one resource.
    expect(q?.headers['accept-encoding']).toBeUndefined();
    expect(q?.headers['authorization']).toBeUndefined();
    const payload = String(q?.headers['grpc-metadata-x-sidero-payload']);
    expect(JSON.parse(payload)).toEqual({
      headers: { 'x-sidero-timestamp': [String(q?.headers['grpc-metadata-x-sidero-timestamp'])] },
      method: '/cosi.resource.State/Get',
    });
    const [v, name, fp, sig] = String(q?.headers['grpc-metadata-x-sidero-signature']).split(' ');
    expect([v, name, fp]).toEqual(['siderov1', 'infra-provider:bare-metal', key.fingerprint]);
    const verified = await openpgp.verify({
      message: await openpgp.createMessage({ binary: new TextEncoder().encode(payload) }),
      signature: await openpgp.readSignature({ binarySignature: Buffer.from(sig ?? '', 'base64') }),
      verificationKeys: await openpgp.readKey({ armoredKey: key.armoredPublicKey }),
    });
    await expect(verified.signatures[0]?.verified).resolves.toBe(true);
  });

  it('NotFound names the method and the resource', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 404, { code: 5, message: "resource m1 doesn't exist" }));
    const err = await client.state.get(ptr).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).message).toBe(
      "/cosi.resource.State/Get infra-provider/InfraMachines.omni.sidero.dev/m1: NotFound: resource m1 doesn't exist",
    );
    expect((err as NotFoundError).resource).toEqual(ptr);
  });
});

describe('List', () => {
  it('sends label and ID queries, reads one resource per line', async () => {
    gw.on('List', async (_q, s) => {
      const w = new LineWriter(s);
      await w.result({ resource: wireResource(res('a')) });
      await w.result({ resource: wireResource(res('b')) });
      w.end();
    });
    const got = await client.state.list('infra-provider', 'InfraMachines.omni.sidero.dev', {
      labelQueries: [
        [{ key: 'omni.sidero.dev/infra-provider-id', op: 'EQUAL', value: ['bare-metal'] }],
        [{ key: 'x', op: 'EXISTS', invert: true }],
      ],
      idRegexp: '^m',
    });
    expect(got.map((r) => r.metadata.id)).toEqual(['a', 'b']);
    expect(gw.calls('List')[0]?.body).toEqual({
      namespace: 'infra-provider',
      type: 'InfraMachines.omni.sidero.dev',
      options: {
        label_query: [
          { terms: [{ key: 'omni.sidero.dev/infra-provider-id', op: 1, value: ['bare-metal'] }] },
          { terms: [{ key: 'x', invert: true }] },
        ],
        id_query: { regexp: '^m' },
      },
    });
  });

  it('an empty stream is an empty list; no options means none sent', async () => {
    gw.on('List', (_q, s) => new LineWriter(s).end());
    expect(await client.state.list('infra-provider', 'X')).toEqual([]);
    expect(gw.calls('List')[0]?.body).toEqual({ namespace: 'infra-provider', type: 'X', options: {} });
    // By default (compression.ts DEFAULT_COMPRESSION_POLICY, `auto`) a List on loopback asks for no
    // gzip: inflating costs more than the bytes (elsewhere it does: test/omni-client/transport/compression.test.ts).
    expect(gw.calls('List')[0]?.headers['accept-encoding']).toBeUndefined();
  });
});

describe('gzip choice', () => {
  it("gzip: 'streams' asks for gzip on List and Watch only, wherever Omni is", async () => {
    const streams = await createOmniClient({
      endpoint: gw.url,
      key: key.serviceAccountKey,
      delay: noDelay,
      env: {},
      gzip: 'streams',
    });
    try {
      gw.on('List', (_q, s) => new LineWriter(s, { gzip: true }).end());
      gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
      expect(await streams.state.list('infra-provider', 'X')).toEqual([]);
      await streams.state.get(ptr);
      expect(gw.calls('List')[0]?.headers['accept-encoding']).toBe('gzip');
      expect(gw.calls('Get')[0]?.headers['accept-encoding']).toBeUndefined();
    } finally {
      await streams.close();
    }
  });

  it("gzip: 'all' asks for gzip on unary calls too, and decodes the gzip answer", async () => {
    const all = await createOmniClient({
      endpoint: gw.url,
      key: key.serviceAccountKey,
      delay: noDelay,
      env: {},
      gzip: 'all',
    });
    try {
      gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }, { gzip: true }));
      expect((await all.state.get(ptr)).metadata.id).toBe('m1');
      expect(gw.calls('Get')[0]?.headers['accept-encoding']).toBe('gzip');
    } finally {
      await all.close();
    }
  });
});

describe('Create, Update, Destroy', () => {
  it('Create sends the resource and the owner option', async () => {
    const r = res('s1', {
      type: 'InfraMachineStatuses.omni.sidero.dev',
      version: 'undefined',
      created: undefined,
      updated: undefined,
    });
    gw.on('Create', (q, s) => {
      const back = res('s1', { type: 'InfraMachineStatuses.omni.sidero.dev', owner: 'bare-metal.X' });
      sendJson(s, 200, { resource: wireResource(back) });
      void q;
    });
    const created = await client.state.create(r, { owner: 'bare-metal.X' });
    expect(created.metadata.version).toBe('1');
    expect(gw.calls('Create')[0]?.body).toEqual({
      resource: {
        metadata: {
          namespace: 'infra-provider',
          type: 'InfraMachineStatuses.omni.sidero.dev',
          id: 's1',
          version: 'undefined',
          phase: 'running',
        },
        spec: { proto_spec: 'CAE=' },
      },
      options: { owner: 'bare-metal.X' },
    });
  });

  it("Update sends expected_phase only when asked; owner defaults to the resource's", async () => {
    const r = res('m1', { owner: 'o' });
    gw.on('Update', (_q, s) =>
      sendJson(s, 200, { resource: wireResource({ ...r, metadata: { ...r.metadata, version: '2' } }) }),
    );
    const after = await client.state.update(r);
    expect(after.metadata.version).toBe('2');
    await client.state.update(r, { owner: 'p', expectedPhase: 'running' });
    const [a, b] = gw.calls('Update');
    expect(a?.body['options']).toEqual({ owner: 'o' });
    expect(b?.body['options']).toEqual({ owner: 'p', expected_phase: 'running' });
    expect(newResourceOf(a?.body ?? {})['metadata']).toMatchObject({
      id: 'm1',
      version: '1',
      owner: 'o',
      phase: 'running',
    });
  });

  it('Destroy sends the pointer and owner; pending finalizers are FailedPrecondition', async () => {
    gw.on('Destroy', (_q, s) => sendJson(s, 200, {}));
    await client.state.destroy(ptr, { owner: 'bare-metal.X' });
    expect(gw.calls('Destroy')[0]?.body).toEqual({ ...ptr, options: { owner: 'bare-metal.X' } });
    gw.on('Destroy', (_q, s) => sendJson(s, 400, { code: 9, message: 'resource has pending finalizers' }));
    await expect(client.state.destroy(ptr)).rejects.toBeInstanceOf(FailedPreconditionError);
  });
});

describe('teardown (Get + Update, never the Teardown RPC)', () => {
  it('sets phase tearingDown with owner = current owner and expected_phase running', async () => {
    const r = res('m1', { owner: 'bare-metal.C', finalizers: ['f'] });
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(r) }));
    gw.on('Update', (q, s) => sendJson(s, 200, { resource: newResourceOf(q.body) }));
    expect(await client.state.teardown(ptr)).toBe(false);
    const [u] = gw.calls('Update');
    expect(u?.body['options']).toEqual({ owner: 'bare-metal.C', expected_phase: 'running' });
    expect(newResourceOf(u?.body ?? {})['metadata']).toMatchObject({
      phase: 'tearingDown',
      owner: 'bare-metal.C',
      version: '1',
      finalizers: ['f'],
    });
    expect(gw.calls('Teardown')).toHaveLength(0);
  });

  it('already tearing down: no write; destroy-ready when no finalizers', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1', { phase: 'tearingDown' })) }));
    expect(await client.state.teardown(ptr)).toBe(true);
    expect(gw.calls('Update')).toHaveLength(0);
  });

  it('NotFound: thrown when its Get finds nothing; after its Get found it, nothing holds it (true)', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 404, { code: 5, message: 'not found' }));
    await expect(client.state.teardown(ptr)).rejects.toMatchObject({ code: 'OMNI_NOT_FOUND' });
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1', { finalizers: ['f'] })) }));
    gw.on('Update', (_q, s) => sendJson(s, 404, { code: 5, message: 'not found' }));
    expect(await client.state.teardown(ptr)).toBe(true);
  });

  it('retries a version conflict after reading again', async () => {
    let v = 1;
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1', { version: String(v) })) }));
    gw.on('Update', (q, s) => {
      if (v === 1) {
        v = 2;
        return conflict(s);
      }
      sendJson(s, 200, { resource: newResourceOf(q.body) });
    });
    expect(await client.state.teardown(ptr)).toBe(true);
    expect(
      gw.calls('Update').map((u) => (newResourceOf(u.body)['metadata'] as Record<string, unknown>)['version']),
    ).toEqual(['1', '2']);
  });
});

describe('removeFinalizers', () => {
  const ours = ['bare-metal.InfraMachineController', 'bare-metal.BMC'];
  const read = (): Resource => {
    const r = res(
      'm1',
      {
        owner: '',
        phase: 'tearingDown',
        finalizers: ['omni.Controller', 'bare-metal.InfraMachineController', 'bare-metal.BMC'],
        labels: { 'omni.sidero.dev/infra-provider-id': 'bare-metal' },
        annotations: { note: 'x' },
      },
      new Uint8Array([8, 1, 0x98, 0x06, 0x01]),
    ); // an unknown field (99) kept byte for byte
    r.spec.yamlSpec = 'opaque: 1\n';
    return r;
  };

  it('one Update with all of them removed, everything else exactly as read, no expected_phase', async () => {
    const r = read();
    gw.on('Update', (q, s) => sendJson(s, 200, { resource: newResourceOf(q.body) }));
    const out = await client.state.removeFinalizers(r, ours);
    expect(out.outcome).toBe('removed');
    expect(out.attempts).toBe(1);
    expect(out.after?.metadata.finalizers).toEqual(['omni.Controller']);
    expect(gw.calls('Get')).toHaveLength(0);
    const [u] = gw.calls('Update');
    expect(u?.body['options']).toEqual({});
    const expected = wireResource({ ...r, metadata: { ...r.metadata, finalizers: ['omni.Controller'] } });
    expect(newResourceOf(u?.body ?? {})).toEqual(expected);
    expect((newResourceOf(u?.body ?? {})['spec'] as Record<string, unknown>)['proto_spec']).toBe(
      Buffer.from([8, 1, 0x98, 0x06, 0x01]).toString('base64'),
    );
  });

  it('reads first when given a pointer; none present = absent, no Update', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1', { finalizers: ['other'] })) }));
    const out = await client.state.removeFinalizers(ptr, ours);
    expect(out).toMatchObject({ outcome: 'absent', attempts: 0 });
    expect(gw.calls('Get')).toHaveLength(1);
    expect(gw.calls('Update')).toHaveLength(0);
  });

  // Design rule 4: NotFound means done only for a resource read by that ID. A NotFound before any
  // Get of the call found it is `not-found` (the caller decides); after one, `gone`.
  it('NotFound before anything found it by its ID is not-found; after a Get found it, gone', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 404, { code: 5, message: 'not found' }));
    expect((await client.state.removeFinalizers(ptr, ours)).outcome).toBe('not-found');
    gw.on('Update', (_q, s) => sendJson(s, 404, { code: 5, message: 'not found' }));
    expect((await client.state.removeFinalizers(read(), ours)).outcome).toBe('not-found');
    // A conflict, a re-read that finds it, then NotFound on the write: destroyed meanwhile.
    let updates = 0;
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(read()) }));
    gw.on('Update', (_q, s) => (++updates === 1 ? conflict(s) : sendJson(s, 404, { code: 5, message: 'not found' })));
    expect((await client.state.removeFinalizers(read(), ours)).outcome).toBe('gone');
  });

  it('version conflict: reads again and retries with what it read', async () => {
    let stored = read();
    stored.metadata.version = '2';
    stored.metadata.labels['new'] = 'label';
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(stored) }));
    gw.on('Update', (q, s) => {
      const md = newResourceOf(q.body)['metadata'] as Record<string, unknown>;
      if (md['version'] !== stored.metadata.version) return conflict(s);
      stored = { ...stored, metadata: { ...stored.metadata, version: '3' } };
      sendJson(s, 200, { resource: newResourceOf(q.body) });
    });
    const out = await client.state.removeFinalizers(read(), ours);
    expect(out.outcome).toBe('removed');
    expect(out.attempts).toBe(2);
    const second = newResourceOf(gw.calls('Update')[1]?.body ?? {})['metadata'] as Record<string, unknown>;
    expect(second).toMatchObject({
      version: '2',
      labels: { 'omni.sidero.dev/infra-provider-id': 'bare-metal', new: 'label' },
      finalizers: ['omni.Controller'],
    });
  });

  it('read-only PermissionDenied with a changed resource: reads again and retries', async () => {
    const changed = read();
    changed.metadata.version = '2';
    changed.metadata.annotations['changed'] = 'yes';
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(changed) }));
    let n = 0;
    gw.on('Update', (q, s) => {
      if (n++ === 0)
        return sendJson(s, 403, {
          code: 7,
          message: 'infra providers are not allowed to update InfraMachines other than setting finalizers',
        });
      sendJson(s, 200, { resource: newResourceOf(q.body) });
    });
    const out = await client.state.removeFinalizers(read(), ours);
    expect(out).toMatchObject({ outcome: 'removed', attempts: 2 });
    expect(
      (newResourceOf(gw.calls('Update')[1]?.body ?? {})['metadata'] as Record<string, unknown>)['annotations'],
    ).toEqual({ note: 'x', changed: 'yes' });
  });

  it('PermissionDenied on an unchanged resource is a refusal: thrown after one attempt', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(read()) }));
    gw.on('Update', (_q, s) => sendJson(s, 403, { code: 7, message: 'namespace not allowed' }));
    const err = await client.state.removeFinalizers(read(), ours).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect(gw.calls('Update')).toHaveLength(1);
  });

  it('requirePhase: a resource re-created running between the conflict and the retry is left alone', async () => {
    const recreated = res('m1', { finalizers: ['bare-metal.WipeStatusController'] });
    recreated.metadata.phase = 'running';
    recreated.metadata.version = '1';
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(recreated) }));
    gw.on('Update', (_q, s) => conflict(s));
    const torn = read();
    torn.metadata.phase = 'tearingDown';
    const out = await client.state.removeFinalizers(torn, ours, { requirePhase: 'tearingDown' });
    expect(out.outcome).toBe('phase-changed');
    expect(gw.calls('Update')).toHaveLength(1);
    // And a resource given in the wrong phase is not written at all.
    const out2 = await client.state.removeFinalizers(recreated, ours, { requirePhase: 'tearingDown' });
    expect(out2.outcome).toBe('phase-changed');
    expect(gw.calls('Update')).toHaveLength(1);
  });

  it('bounded: endless conflicts end in the conflict error after 8 attempts', async () => {
    gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(read()) }));
    gw.on('Update', (_q, s) => conflict(s));
    await expect(client.state.removeFinalizers(read(), ours)).rejects.toBeInstanceOf(FailedPreconditionError);
    expect(gw.calls('Update')).toHaveLength(8);
  });
});

it('counts every HTTP call by method', async () => {
  gw.on('Get', (_q, s) => sendJson(s, 200, { resource: wireResource(res('m1')) }));
  gw.on('Destroy', (_q, s) => sendJson(s, 200, {}));
  await client.state.get(ptr);
  await client.state.get(ptr);
  await client.state.destroy(ptr);
  expect(client.stats().callsByMethod).toEqual({ Get: 2, Destroy: 1 });
});
