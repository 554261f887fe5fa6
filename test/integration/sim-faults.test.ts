// Faults of the simulated Omni, seen over HTTP the way a client meets them.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { rawCall, type RawKey } from '../helpers/raw-client.js';
import { openStream } from '../helpers/sim-stream.js';

const NS = 'infra-provider';
const TYPE = 'InfraMachineStatuses.omni.sidero.dev';

let sim: Sim;
let key: RawKey;

beforeAll(async () => {
  sim = await createSim(`
omni: { version: "1.8" }
identities: [{ name: admin@example.org, role: Admin }]
faults: { unavailable_burst: 1 }
`, { access: (c) => c.store, controllers: false });
  const k = sim.generatedKeys['admin@example.org']!;
  key = { name: k.name, armoredPrivateKey: k.armoredPrivateKey };
});
afterAll(async () => {
  await sim?.close();
});

const call = (method: string, body: unknown, opts = {}) => rawCall(sim.endpoint, key, method, body, opts);
const create = (id: string, type = TYPE) => call('Create', { resource: { metadata: { namespace: NS, type, id, version: 'undefined', phase: 'running' }, spec: {} } });
type Res = { resource: { metadata: Record<string, unknown>; spec: Record<string, unknown> } };

describe('faults', () => {
  it('a burst of Unavailable from the scenario, then a burst set at run time', async () => {
    const first = await call('Get', { namespace: NS, type: TYPE, id: 'x' });
    expect([first.status, (first.json as { code: number }).code]).toEqual([503, 14]);
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(404);
    sim.faults.set({ unavailableBurst: 2 });
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(503);
    const list = await call('List', { namespace: NS, type: TYPE });
    expect([list.status, (list.json as { code: number }).code]).toEqual([503, 14]);
    expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(404);
  });

  it('added latency per call', async () => {
    sim.faults.set({ latencyMs: 150 });
    try {
      const t0 = performance.now();
      await call('Get', { namespace: NS, type: TYPE, id: 'x' });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    } finally {
      sim.faults.set({ latencyMs: undefined });
    }
  });

  it('a clock offset moves the Date header and the signature skew check together', async () => {
    sim.faults.set({ clockOffsetMs: 10 * 60_000 });
    try {
      const nowS = Math.floor(Date.now() / 1000);
      expect((await call('Get', { namespace: NS, type: TYPE, id: 'x' }, { timestamp: nowS })).status).toBe(401);
      const ok = await call('Get', { namespace: NS, type: TYPE, id: 'x' }, { timestamp: nowS + 600 });
      expect(ok.status).toBe(404);
      expect(Date.parse(String(ok.headers['date'])) - Date.now()).toBeGreaterThan(9 * 60_000);
      // timestamps written by the server follow its clock too
      const c = await call('Create', { resource: { metadata: { namespace: NS, type: TYPE, id: 'clocked', version: 'undefined', phase: 'running' }, spec: {} } }, { timestamp: nowS + 600 });
      expect(Date.parse(String((c.json as Res).resource.metadata['created'])) - Date.now()).toBeGreaterThan(9 * 60_000);
    } finally {
      sim.faults.set({ clockOffsetMs: undefined });
    }
  });

  it('a version-conflict storm: a concurrent writer wins N times, then the client gets through', async () => {
    await create('storm', 'Storm');
    sim.faults.set({ conflictStorm: { type: 'Storm', namespace: NS, count: 2 } });
    const codes: number[] = [];
    let version = '';
    for (let i = 0; i < 5; i++) {
      const cur = (await call('Get', { namespace: NS, type: 'Storm', id: 'storm' })).json as Res;
      const u = await call('Update', { new_resource: { metadata: { ...cur.resource.metadata, finalizers: ['mine'] }, spec: cur.resource.spec } });
      codes.push(u.status === 200 ? 0 : (u.json as { code: number }).code);
      if (u.status === 200) {
        version = String((u.json as Res).resource.metadata['version']);
        break;
      }
    }
    expect(codes).toEqual([9, 9, 0]);
    expect(version).toBe('4'); // 1 + two bumps by the storm + the client's update
    expect(sim.faults.config.conflictStorm?.count).toBe(0);
  });

  it('watch streams are dropped after N events', async () => {
    sim.faults.set({ dropWatchAfterEvents: 2 });
    try {
      const s = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Dropped', options: { bootstrap_bookmark: true }, api_version: 1 });
      expect(await s.next()).toEqual({ result: {} });
      await s.next(); // NOOP: event 1
      await create('d1', 'Dropped'); // event 2: delivered, then the connection is cut
      expect(((await s.next()) as { result: { event: unknown[] } }).result.event).toHaveLength(1);
      expect(await s.ended).toBe('error');
    } finally {
      sim.faults.set({ dropWatchAfterEvents: undefined });
    }
  });

  it('a restart keeps state, breaks open streams and refuses the bookmarks issued before it', async () => {
    await create('r1', 'Restart');
    const s = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Restart', options: { bootstrap_contents: true }, api_version: 1 });
    await s.next();
    await s.next();
    const boot = (await s.next()) as { result: { event: { bookmark: string }[] } };
    const bm = boot.result.event[0]?.bookmark;
    expect(sim.gateway.openStreams).toBeGreaterThan(0);
    sim.faults.restart();
    expect(await s.ended).toBe('error');
    expect(sim.faults.restartCount).toBe(1);
    // etcd's history before the restart is gone: the watch is established, then refused with ERRORED.
    const again = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Restart', options: { start_from_bookmark: bm }, api_version: 1 });
    try {
      expect(again.status).toBe(200);
      expect(await again.next()).toEqual({ result: {} });
      expect(await again.next()).toEqual({ result: { event: [{ event_type: 4, error: 'etcdserver: mvcc: required revision has been compacted' }] } });
    } finally {
      again.close();
    }
    const g = await call('Get', { namespace: NS, type: 'Restart', id: 'r1' });
    expect((g.json as Res).resource.metadata['version']).toBe('1');
    // a fresh watch after the restart works and its bookmarks resume
    const f = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Restart', options: { bootstrap_bookmark: true }, api_version: 1 });
    try {
      await f.next();
      const noop = (await f.next()) as { result: { event: { bookmark: string }[] } };
      await create('r2', 'Restart');
      const r = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Restart', options: { start_from_bookmark: noop.result.event[0]?.bookmark }, api_version: 1 });
      await r.next();
      const ev = (await r.next()) as { result: { event: { resource: { metadata: { id: string } } }[] } };
      expect(ev.result.event[0]?.resource.metadata.id).toBe('r2');
      r.close();
    } finally {
      f.close();
    }
  });

  it('injected ERRORED events end open watches (dropped for api_version 0 clients)', async () => {
    const v1 = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Err', api_version: 1 });
    const v0 = await openStream(sim.endpoint, key, 'Watch', { namespace: NS, type: 'Err' });
    await v1.next();
    await v0.next();
    sim.faults.failWatches('buffer overrun');
    const e = (await v1.next()) as { result: { event: { event_type: number; error: string; resource?: unknown }[] } };
    expect(e.result.event[0]).toEqual({ event_type: 4, error: 'buffer overrun' });
    expect(await v1.ended).toBe('end');
    expect(await v0.ended).toBe('end');
    await expect(v0.next()).rejects.toThrow(/ended/);
  });
});
