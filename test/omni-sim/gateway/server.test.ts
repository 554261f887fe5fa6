// The sim's gateway over real HTTP on 127.0.0.1:0, called with a client of its own
// (test/helpers/raw-client.ts), with the store served directly (no access rules) so that these tests
// are about transport and state semantics only.

import { gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSim, type Sim } from '../../../src/omni-sim/index.js';
import { rawCall, type RawKey } from '../../helpers/raw-client.js';
import { openStream } from '../../helpers/sim-stream.js';

const NS = 'infra-provider';
const TYPE = 'InfraMachineStatuses.omni.sidero.dev';
const OPAQUE = 'WipeStatus.bare-metal.infraprovider.sidero.dev';

const scenario = (version: string) => `
omni: { version: "${version}" }
identities:
  - { name: admin@example.org, role: Admin }
`;

let sim: Sim;
let old: Sim;
let key: RawKey;
let oldKey: RawKey;

function rkey(s: Sim): RawKey {
  const k = s.generatedKeys['admin@example.org'];
  if (!k) throw new Error('no generated key');
  return { name: k.name, armoredPrivateKey: k.armoredPrivateKey };
}

beforeAll(async () => {
  sim = await createSim(scenario('1.8.0'), { access: (c) => c.store });
  old = await createSim(scenario('1.3.4'), { access: (c) => c.store });
  key = rkey(sim);
  oldKey = rkey(old);
});
afterAll(async () => {
  await sim?.close();
  await old?.close();
});

const md = (id: string, extra: Record<string, unknown> = {}) => ({
  namespace: NS,
  type: TYPE,
  id,
  version: 'undefined',
  phase: 'running',
  ...extra,
});
const call = (method: string, body: unknown, opts = {}) => rawCall(sim.endpoint, key, method, body, opts);

describe('unary calls', () => {
  it("writes labels and annotations with their keys sorted, as Go's protojson does", async () => {
    const c = await call('Create', {
      resource: {
        metadata: md('sorted', { labels: { z: '1', a: '2', m: '3' }, annotations: { y: '', b: '' } }),
        spec: {},
      },
      options: { owner: '' },
    });
    const m = (c.json as { resource: { metadata: { labels: object; annotations: object } } }).resource.metadata;
    expect([Object.keys(m.labels), Object.keys(m.annotations)]).toEqual([
      ['a', 'm', 'z'],
      ['b', 'y'],
    ]);
    expect(c.text.indexOf('"a":"2"')).toBeLessThan(c.text.indexOf('"z":"1"'));
  });

  it('Create/Get/Update/Destroy with protojson conventions', async () => {
    const c = await call('Create', {
      resource: { metadata: md('m1', { labels: { a: 'b' } }), spec: { proto_spec: 'EAE=' } },
      options: { owner: 'Ctl' },
    });
    expect(c.status).toBe(200);
    const r = (c.json as { resource: { metadata: Record<string, unknown>; spec: Record<string, unknown> } }).resource;
    expect(r.metadata).toMatchObject({
      namespace: NS,
      type: TYPE,
      id: 'm1',
      version: '1',
      owner: 'Ctl',
      phase: 'running',
      updated: '1970-01-01T00:00:00Z',
      labels: { a: 'b' },
    });
    expect(r.metadata['finalizers']).toBeUndefined(); // empty lists are omitted
    expect(r.spec['proto_spec']).toBe('EAE=');
    expect(typeof r.spec['yaml_spec']).toBe('string'); // Omni renders yaml_spec for its own types

    const g = await call('Get', { namespace: NS, type: TYPE, id: 'm1' });
    expect((g.json as { resource: { metadata: { version: string } } }).resource.metadata.version).toBe('1');

    const u = await call('Update', {
      new_resource: { metadata: { ...r.metadata, finalizers: ['f'] }, spec: r.spec },
      options: { owner: 'Ctl', expected_phase: 'running' },
    });
    expect(u.status).toBe(200);
    expect(
      (u.json as { resource: { metadata: { version: string; finalizers: string[] } } }).resource.metadata,
    ).toMatchObject({ version: '2', finalizers: ['f'] });

    const d = await call('Destroy', { namespace: NS, type: TYPE, id: 'm1', options: { owner: 'Ctl' } });
    expect(d.status).toBe(400);
    expect(d.json).toMatchObject({ code: 9, message: expect.stringContaining('has pending finalizers') });
  });

  it('conflicts carry the gRPC code in the body: version 9 and phase 3 are both HTTP 400; owner 403', async () => {
    await call('Create', { resource: { metadata: md('m2'), spec: {} }, options: { owner: 'Ctl' } });
    const base = { metadata: md('m2', { version: '1', owner: 'Ctl' }), spec: {} };
    const v = await call('Update', {
      new_resource: { ...base, metadata: { ...base.metadata, version: '5' } },
      options: { owner: 'Ctl' },
    });
    expect([v.status, (v.json as { code: number }).code]).toEqual([400, 9]);
    const p = await call('Update', { new_resource: base, options: { owner: 'Ctl', expected_phase: 'tearingDown' } });
    expect([p.status, (p.json as { code: number }).code]).toEqual([400, 3]);
    const o = await call('Update', { new_resource: base, options: { owner: 'Nope' } });
    expect([o.status, (o.json as { code: number }).code]).toEqual([403, 7]);
    const ok = await call('Update', { new_resource: base, options: { owner: 'Ctl' } });
    expect(ok.status).toBe(200);
  });

  it('Create: owner already set is Unknown (500); metadata validation failures are Unknown', async () => {
    const o = await call('Create', {
      resource: { metadata: md('m3', { owner: 'X' }), spec: {} },
      options: { owner: '' },
    });
    expect([o.status, o.json]).toEqual([500, { code: 2, message: 'owner is already set' }]);
    const nospec = await call('Create', { resource: { metadata: md('m3') } });
    expect([nospec.status, nospec.json]).toEqual([500, { code: 2, message: 'spec is missing' }]);
    const badVersion = await call('Create', { resource: { metadata: md('m3', { version: '' }), spec: {} } });
    expect([badVersion.status, (badVersion.json as { code: number }).code]).toEqual([500, 2]);
    const badPhase = await call('Create', { resource: { metadata: md('m3', { phase: 'gone' }), spec: {} } });
    expect((badPhase.json as { code: number }).code).toBe(2);
    const badSpec = await call('Create', { resource: { metadata: md('m3'), spec: { proto_spec: '/w==' } } });
    expect((badSpec.json as { code: number }).code).toBe(2);
    const dup = await call('Create', { resource: { metadata: md('m2'), spec: {} }, options: { owner: 'Ctl' } });
    expect([dup.status, (dup.json as { code: number }).code]).toEqual([409, 6]);
  });

  it('opaque provider types keep proto_spec and yaml_spec verbatim', async () => {
    const body = {
      resource: {
        metadata: {
          namespace: 'infra-provider:bare-metal',
          type: OPAQUE,
          id: 'w',
          version: 'undefined',
          phase: 'running',
        },
        spec: { proto_spec: 'CgN4eXo=', yaml_spec: 'lastwipeid: xyz\n' },
      },
    };
    const c = await call('Create', body);
    expect((c.json as { resource: { spec: unknown } }).resource.spec).toEqual({
      proto_spec: 'CgN4eXo=',
      yaml_spec: 'lastwipeid: xyz\n',
    });
  });

  it('unknown JSON fields are 400 code 3; lowerCamel, enum names accepted; empty body an empty message', async () => {
    const u = await call('Get', { namespace: NS, type: TYPE, id: 'x', bogus: 1 });
    expect(u.status).toBe(400);
    expect(u.json).toMatchObject({ code: 3, message: expect.stringContaining('unknown field "bogus"') });
    const camel = await call('Update', {
      newResource: { metadata: md('nope', { version: '1' }), spec: {} },
      options: { expectedPhase: 'running' },
    });
    expect((camel.json as { code: number }).code).toBe(5);
    const empty = await rawCall(sim.endpoint, key, 'Get', undefined, { body: '' });
    expect([empty.status, (empty.json as { code: number }).code]).toEqual([404, 5]);
    const trailing = await rawCall(sim.endpoint, key, 'Get', undefined, {
      body: `{"namespace":"${NS}","type":"${TYPE}","id":"m2"} garbage`,
    });
    expect(trailing.status).toBe(200);
  });

  it('never crashes on bad input and keeps serving', async () => {
    const bodies = [
      '{',
      '[]',
      '"x"',
      'null',
      '{"namespace":1}',
      '{"options":{"owner":[]}}',
      '{"id":"\\ud800","zzz":1}',
      `${'['.repeat(5000)}`,
      '{"resource":{"spec":{"proto_spec":"!!"}}}',
    ];
    for (const b of bodies) {
      for (const m of ['Get', 'Create', 'Watch', 'List']) {
        const r = await rawCall(sim.endpoint, key, m, undefined, { body: b });
        expect(r.status, `${m} ${b.slice(0, 20)}`).toBeGreaterThanOrEqual(400);
        expect(r.status).toBeLessThan(600);
      }
    }
    const surrogate = await rawCall(sim.endpoint, key, 'Get', undefined, { body: '{"id":"\\ud800"}' });
    expect(surrogate.status).toBe(404);
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'm2' })).status).toBe(200);
  });

  it('routes: 404 for unknown paths, 501 for non-POST on a known path, Teardown only from Omni 1.8', async () => {
    const unknown = await rawCall(sim.endpoint, key, 'Frobnicate', {});
    expect([unknown.status, unknown.json]).toEqual([404, { code: 5, message: 'Not Found' }]);
    const get = await rawCall(sim.endpoint, key, 'Get', undefined, { httpMethod: 'GET', body: '' });
    expect([get.status, get.json]).toEqual([501, { code: 12, message: 'Method Not Allowed' }]);
    const other = await request(`${sim.endpoint}/healthz`, { method: 'POST', body: '{}' });
    expect(other.statusCode).toBe(404);
    await other.body.text();
    const t13 = await rawCall(old.endpoint, oldKey, 'Teardown', { namespace: NS, type: TYPE, id: 'x' });
    expect([t13.status, t13.json]).toEqual([404, { code: 5, message: 'Not Found' }]);
    const tad13 = await rawCall(old.endpoint, oldKey, 'TeardownAndDestroy', { namespace: NS, type: TYPE, id: 'x' });
    expect(tad13.status).toBe(404);
    const t18 = await call('Teardown', { namespace: NS, type: TYPE, id: 'x' });
    expect([t18.status, (t18.json as { message: string }).message]).toEqual([
      404,
      expect.stringContaining("doesn't exist"),
    ]);
  });

  it('Teardown answers destroy_ready (omitted when false); TeardownAndDestroy waits for the finalizers', async () => {
    await call('Create', {
      resource: { metadata: md('td', { finalizers: ['f'] }), spec: {} },
      options: { owner: 'Ctl' },
    });
    const t = await call('Teardown', { namespace: NS, type: TYPE, id: 'td', options: { owner: 'Ctl' } });
    expect([t.status, t.json]).toEqual([200, {}]);
    let settled = false;
    const tad = call('TeardownAndDestroy', { namespace: NS, type: TYPE, id: 'td', options: { owner: 'Ctl' } }).then(
      (r) => {
        settled = true;
        return r;
      },
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    const cur = sim.store.get({ name: 't', email: 't', role: 'Admin' }, { namespace: NS, type: TYPE, id: 'td' });
    sim.store.update(
      { name: 't', email: 't', role: 'Admin' },
      { ...cur, metadata: { ...cur.metadata, finalizers: [] } },
      'Ctl',
    );
    const done = await tad;
    expect([done.status, done.json]).toEqual([200, {}]);
    expect(sim.store.peek({ namespace: NS, type: TYPE, id: 'td' })).toBeUndefined();
    await call('Create', { resource: { metadata: md('td2'), spec: {} } });
    expect((await call('Teardown', { namespace: NS, type: TYPE, id: 'td2' })).json).toEqual({ destroy_ready: true });
  });

  it('401 with WWW-Authenticate for an unsigned call; streams answer 401 with an error line', async () => {
    const u = await rawCall(sim.endpoint, undefined, 'Get', { namespace: NS, type: TYPE, id: 'x' });
    expect([u.status, u.json, u.headers['www-authenticate']]).toEqual([
      401,
      { code: 16, message: 'invalid signature' },
      'invalid signature',
    ]);
    const l = await rawCall(sim.endpoint, undefined, 'List', { namespace: NS, type: TYPE });
    expect([l.status, l.json]).toEqual([401, { error: { code: 16, message: 'invalid signature' } }]);
    const stale = await call(
      'Get',
      { namespace: NS, type: TYPE, id: 'x' },
      { timestamp: Math.floor(Date.now() / 1000) - 3600 },
    );
    expect(stale.status).toBe(401);
  });

  it('Date header follows the sim clock (clock-offset fault), Vary is always set', async () => {
    sim.faults.set({ clockOffsetMs: 2 * 3600_000 });
    try {
      const r = await call(
        'Get',
        { namespace: NS, type: TYPE, id: 'm2' },
        { timestamp: Math.floor(Date.now() / 1000) + 2 * 3600 },
      );
      expect(r.status).toBe(200);
      const skew = Date.parse(String(r.headers['date'])) - Date.now();
      expect(Math.abs(skew - 2 * 3600_000)).toBeLessThan(5000);
      expect(r.headers['vary']).toBe('Accept-Encoding');
      // the client's ordinary timestamp is now two hours behind the server: refused
      expect((await call('Get', { namespace: NS, type: TYPE, id: 'm2' })).status).toBe(401);
    } finally {
      sim.faults.set({ clockOffsetMs: undefined });
    }
  });

  it('gzip only for a bare gzip token', async () => {
    const gz = await request(`${sim.endpoint}/api/cosi.resource.State/Get`, {
      method: 'POST',
      headers: { 'accept-encoding': 'br, gzip' },
      body: '{}',
    });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(Buffer.from(await gz.body.arrayBuffer())).toString())).toMatchObject({ code: 16 });
    const q = await request(`${sim.endpoint}/api/cosi.resource.State/Get`, {
      method: 'POST',
      headers: { 'accept-encoding': 'gzip;q=1.0' },
      body: '{}',
    });
    expect(q.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(await q.body.text())).toMatchObject({ code: 16 });
  });
});

describe('streams', () => {
  it('List: one {"result":{"resource":...}} line per resource, sorted by ID, with queries', async () => {
    for (const id of ['l-c', 'l-a', 'l-b']) {
      await call('Create', {
        resource: { metadata: { ...md(id), type: 'ListMe', labels: { k: id === 'l-b' ? 'x' : 'y' } }, spec: {} },
      });
    }
    const all = await call('List', { namespace: NS, type: 'ListMe' });
    expect(all.status).toBe(200);
    expect(all.headers['content-type']).toBe('application/json');
    expect(
      all.lines.map((l) => (l as { result: { resource: { metadata: { id: string } } } }).result.resource.metadata.id),
    ).toEqual(['l-a', 'l-b', 'l-c']);
    const q = await call('List', {
      namespace: NS,
      type: 'ListMe',
      options: { label_query: [{ terms: [{ key: 'k', op: 'EQUAL', value: ['y'] }] }], id_query: { regexp: 'c$' } },
    });
    expect(q.lines).toHaveLength(1);
    const none = await call('List', { namespace: NS, type: 'Nothing' });
    expect([none.status, none.text]).toEqual([200, '']);
    const bad = await call('List', { namespace: NS, type: 'ListMe', options: { id_query: { regexp: '(' } } });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: { code: 3 } });
    const internal = await call('List', {
      namespace: NS,
      type: 'ListMe',
      options: { label_query: [{ terms: [{ key: 'k', op: 1 }] }] },
    });
    expect([internal.status, (internal.json as { error: { code: number } }).error.code]).toEqual([500, 13]);
    const unimpl = await call('List', {
      namespace: NS,
      type: 'ListMe',
      options: { label_query: [{ terms: [{ key: 'k', op: 99, value: ['x'] }] }] },
    });
    expect([unimpl.status, (unimpl.json as { error: { code: number } }).error.code]).toEqual([501, 12]);
  });

  it('Watch: empty first message, bootstrap + BOOTSTRAPPED with bookmark, events per line, HTML escaped', async () => {
    await call('Create', { resource: { metadata: { ...md('w-a'), type: 'WatchMe' }, spec: {} } });
    const s = await openStream(sim.endpoint, key, 'Watch', {
      namespace: NS,
      type: 'WatchMe',
      options: { bootstrap_contents: true },
      api_version: 1,
    });
    try {
      expect(s.status).toBe(200);
      expect(await s.next()).toEqual({ result: {} });
      const created = (await s.next()) as { result: { event: Record<string, unknown>[] } };
      expect(created.result.event).toHaveLength(1);
      expect(created.result.event[0]?.['event_type']).toBeUndefined(); // CREATED = 0 is omitted
      const boot = (await s.next()) as {
        result: {
          event: { event_type: number; bookmark: string; resource: { metadata: { id?: string; version: string } } }[];
        };
      };
      expect(boot.result.event[0]).toMatchObject({ event_type: 3, resource: { metadata: { version: 'undefined' } } });
      // An etcd-backed kind: the bookmark is etcd's 8-byte revision.
      expect(Buffer.from(boot.result.event[0]?.bookmark ?? '', 'base64')).toHaveLength(8);
      expect(boot.result.event[0]?.resource.metadata.id).toBeUndefined();
      await call('Create', {
        resource: { metadata: { ...md('w-b'), type: 'WatchMe', labels: { html: '<b>&' } }, spec: {} },
      });
      const live = (await s.next()) as { result: { event: { resource: { metadata: { id: string } } }[] } };
      expect(live.result.event[0]?.resource.metadata.id).toBe('w-b');
      expect(s.rawLines.at(-1)).toContain('\\u003cb\\u003e\\u0026');
    } finally {
      s.close();
    }
  });

  it('Watch: a bookmark resumes after its event; api_version 0 drops BOOTSTRAPPED; aggregated batches', async () => {
    const s = await openStream(sim.endpoint, key, 'Watch', {
      namespace: NS,
      type: 'Resume',
      options: { aggregated: true, bootstrap_contents: true, bootstrap_bookmark: true },
    });
    let bm: string;
    try {
      await s.next();
      const first = (await s.next()) as { result: { event: { event_type?: number; bookmark: string }[] } };
      // api_version 0: BOOTSTRAPPED dropped, NOOP kept
      expect(first.result.event.map((e) => e.event_type)).toEqual([5]);
      bm = first.result.event[0]?.bookmark ?? '';
      for (const id of ['r1', 'r2'])
        await call('Create', { resource: { metadata: { ...md(id), type: 'Resume' }, spec: {} } });
      const e1 = (await s.next()) as { result: { event: { bookmark: string }[] } };
      bm = e1.result.event[0]?.bookmark ?? bm;
    } finally {
      s.close();
    }
    const r = await openStream(sim.endpoint, key, 'Watch', {
      namespace: NS,
      type: 'Resume',
      options: { start_from_bookmark: bm },
      api_version: 1,
    });
    try {
      await r.next();
      const ids: string[] = [];
      while (ids.length < 1) {
        const l = (await r.next()) as { result: { event: { resource: { metadata: { id: string } } }[] } };
        ids.push(...l.result.event.map((e) => e.resource.metadata.id));
      }
      expect(ids).toEqual(['r2']);
    } finally {
      r.close();
    }
    const bad = await call('Watch', { namespace: NS, type: 'Resume', options: { start_from_bookmark: 'AAAA' } });
    expect([bad.status, bad.json]).toEqual([400, { error: { code: 9, message: expect.stringContaining('bookmark') } }]);
  });

  it('Watch: single resource gets a DESTROYED tombstone; option conflicts fail before the first line', async () => {
    const s = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Single', id: '', api_version: 1 });
    try {
      await s.next();
      const e = (await s.next()) as {
        result: { event: { event_type: number; resource: { metadata: { version: string } } }[] };
      };
      expect(e.result.event[0]).toMatchObject({ event_type: 2, resource: { metadata: { version: 'undefined' } } });
    } finally {
      s.close();
    }
    const conflict = await call('Watch', {
      namespace: NS,
      type: 'X',
      options: { bootstrap_contents: true, tail_events: 3 },
    });
    expect([conflict.status, (conflict.json as { error: { code: number } }).error.code]).toEqual([500, 2]);
    const single = await call('Watch', { namespace: NS, type: 'X', id: 'a', options: { bootstrap_contents: true } });
    expect([single.status, (single.json as { error: { code: number } }).error.code]).toEqual([501, 12]);
  });

  it('Watch over gzip: each line arrives as its own sync-flushed block', async () => {
    const s = await openStream(
      sim.endpoint,
      key,
      'Watch',
      { namespace: NS, type: 'Gz', options: { bootstrap_bookmark: true }, api_version: 1 },
      { 'accept-encoding': 'gzip' },
    );
    try {
      expect(s.headers['content-encoding']).toBe('gzip');
      expect(await s.next()).toEqual({ result: {} });
      expect(((await s.next()) as { result: { event: { event_type: number }[] } }).result.event[0]?.event_type).toBe(5);
      await call('Create', { resource: { metadata: { ...md('gz1'), type: 'Gz' }, spec: {} } });
      expect(
        ((await s.next()) as { result: { event: { resource: { metadata: { id: string } } }[] } }).result.event[0]
          ?.resource.metadata.id,
      ).toBe('gz1');
    } finally {
      s.close();
    }
  });

  it('a client that disconnects releases its watch', async () => {
    const s = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Gone' });
    await s.next();
    expect(sim.gateway.openStreams).toBeGreaterThan(0);
    const before = sim.gateway.openStreams;
    s.close();
    for (let i = 0; i < 50 && sim.gateway.openStreams >= before; i++) await new Promise((r) => setTimeout(r, 20));
    expect(sim.gateway.openStreams).toBeLessThan(before);
  });
});
