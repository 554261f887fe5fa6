// The client's State API (src/omni-client) against two backends with one set of expectations:
//   - `sim`:  the simulated Omni (src/omni-sim), in process;
//   - `cosi`: cosi-project/runtime's own in-memory State behind an Omni-style /api gateway with
//             go-api-signature verification (test/go/cosi-state), as a child process.
// Whatever the client expects of the State API is checked against COSI itself; whatever the sim
// answers is checked against the same expectations. Both sit behind a loopback proxy so that a test
// can cut streams or move the client to a second server. Omni's access rules exist only in the sim:
// the tests write in the provider's own namespace, where those rules let a provider do everything,
// except where a test says otherwise.

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  UnauthenticatedError,
} from '../../src/omni-api/errors.js';
import { newMetadata, T, type Metadata, type Resource } from '../../src/omni-api/resource.js';
import type { LabelQuery, WatchEvent } from '../../src/omni-api/state.js';
import { createSim } from '../../src/omni-sim/index.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { startCosiServer } from '../helpers/cosi-state.js';
import { noDelay } from '../helpers/fake-gateway.js';
import { startTamperProxy, type TamperProxy } from '../helpers/tamper-proxy.js';

const PROVIDER = 'bare-metal';
const NS = `infra-provider:${PROVIDER}`;
const TYPE = `Things.${PROVIDER}.infraprovider.sidero.dev`;
const EPOCH = '1970-01-01T00:00:00Z';
/** Field 99 = 1: unknown to any spec message, kept byte for byte by both servers. */
const OPAQUE = new Uint8Array([0x98, 0x06, 0x01]);

interface Backend {
  name: 'sim' | 'cosi';
  /** Starts one server that accepts `key`'s signatures. */
  start(key: GeneratedKey): Promise<{ endpoint: string; close(): Promise<void> }>;
}

const BACKENDS: Backend[] = [
  {
    name: 'sim',
    start: async (key) => {
      const sim = await createSim(`
omni: { version: "1.9.3" }
identities:
  - name: "infra-provider:${PROVIDER}"
    role: InfraProvider
    public_key: ${JSON.stringify(key.armoredPublicKey)}
resources:
  - metadata: { namespace: infra-provider, type: ${T.InfraProvider}, id: ${PROVIDER} }
    proto_spec: ""
`);
      return { endpoint: sim.endpoint, close: () => sim.close() };
    },
  },
  { name: 'cosi', start: (key) => startCosiServer(key) },
];

const thing = (
  id: string,
  init: Partial<Omit<Metadata, 'namespace' | 'type' | 'id'>> = {},
  protoSpec = OPAQUE,
): Resource => ({
  metadata: newMetadata({ namespace: NS, type: TYPE, id }, init),
  spec: { protoSpec, yamlSpec: `id: ${id}\n` },
});

async function waitFor(what: string, pred: () => boolean, ms = 5_000): Promise<void> {
  for (const started = Date.now(); !pred();) {
    if (Date.now() - started > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A running kind watch (of the test type unless told): every batch it yielded, resets counted, stopped by `stop()`. */
function watch(client: OmniClient, opts: { labelQueries?: LabelQuery[] } = {}, kind = { namespace: NS, type: TYPE }) {
  const ac = new AbortController();
  const batches: WatchEvent[][] = [];
  let resets = 0;
  let failure: unknown;
  const done = (async () => {
    for await (const b of client.state.watchKind(kind.namespace, kind.type, {
      ...opts,
      signal: ac.signal,
      onReset: () => resets++,
    }))
      batches.push(b);
  })().catch((e: unknown) => {
    failure = e;
  });
  const events = () => batches.flat();
  const live = () => events().filter((e) => e.type !== 'bootstrapped' && e.type !== 'noop');
  return {
    batches,
    events,
    /** `type:id` of the events after the bootstrap, in order. */
    seen: (id?: string) =>
      live()
        .filter((e) => id === undefined || e.resource.metadata.id === id)
        .map((e) => `${e.type}:${e.resource.metadata.id}`),
    resets: () => resets,
    failure: () => failure,
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}

describe.each(BACKENDS)('State API against $name', (backend) => {
  let key: GeneratedKey;
  let server: { endpoint: string; close(): Promise<void> };
  let proxy: TamperProxy;
  let client: OmniClient;
  let n = 0;
  /** IDs unique to the test: the servers are shared by the tests of a backend. */
  let id: (name: string) => string;

  beforeAll(async () => {
    key = await generateKey(`infra-provider:${PROVIDER}`, { lifetimeSeconds: 3600 });
    server = await backend.start(key);
    proxy = await startTamperProxy(server.endpoint);
  }, 60_000);
  afterAll(async () => {
    await proxy?.close();
    await server?.close();
  });
  beforeEach(async () => {
    const prefix = `t${++n}-`;
    id = (name) => `${prefix}${name}`;
    proxy.setUpstream(server.endpoint);
    client = await createOmniClient({ endpoint: proxy.endpoint, key: key.serviceAccountKey, delay: noDelay, env: {} });
  });
  afterEach(async () => {
    await client.close();
  });

  describe('Get and Create', () => {
    it('Get of a missing resource is NotFound, naming it', async () => {
      const err = await client.state.get(thing(id('nope')).metadata).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NotFoundError);
      expect((err as NotFoundError).resource).toEqual({ namespace: NS, type: TYPE, id: id('nope') });
    });

    it('Create stores version 1, owner, created, updated as sent (none: the epoch); Get reads it back', async () => {
      const before = Date.now() - 60_000;
      const r = thing(id('a'), { labels: { k: 'v' }, annotations: { note: 'x' }, finalizers: ['f1', 'f2'] });
      const created = await client.state.create(r, { owner: `${PROVIDER}.ThingController` });
      expect(created.metadata).toMatchObject({
        version: '1',
        owner: `${PROVIDER}.ThingController`,
        phase: 'running',
        updated: EPOCH,
        labels: { k: 'v' },
        annotations: { note: 'x' },
        finalizers: ['f1', 'f2'],
      });
      expect(Date.parse(created.metadata.created ?? '')).toBeGreaterThan(before);
      const got = await client.state.get(r.metadata);
      expect(got.metadata).toEqual(created.metadata);
      // A type Omni does not know is stored as sent: spec bytes and yaml_spec both echoed.
      expect(got.spec).toEqual({ protoSpec: OPAQUE, yamlSpec: `id: ${id('a')}\n` });
      const stamped = await client.state.create(thing(id('b'), { updated: '2026-03-01T10:00:00Z' }));
      expect(stamped.metadata.updated).toBe('2026-03-01T10:00:00Z');
    });

    it('Create of an existing ID is AlreadyExists', async () => {
      await client.state.create(thing(id('a')));
      await expect(client.state.create(thing(id('a')))).rejects.toBeInstanceOf(AlreadyExistsError);
    });

    it("an Omni type's spec is decoded and its yaml_spec rendered by the server, whatever a writer sent", async () => {
      const status: Resource = {
        metadata: newMetadata({ namespace: 'infra-provider', type: T.InfraMachineStatus, id: id('m') }),
        spec: { protoSpec: new Uint8Array([8, 2, 16, 1]), yamlSpec: 'not: this\n' },
      };
      const created = await client.state.create(status, { owner: `${PROVIDER}.InfraMachineStatusController` });
      expect(created.spec.protoSpec).toEqual(status.spec.protoSpec);
      expect(created.spec.yamlSpec).toMatch(/^powerstate: 2\nreadytouse: true\n/);
      // The sim adds the label Omni forces on a provider's writes in the shared namespaces.
      if (backend.name === 'sim')
        expect(created.metadata.labels).toEqual({ 'omni.sidero.dev/infra-provider-id': PROVIDER });
    });
  });

  describe('Update and Destroy', () => {
    it('Update: the version read, the stored owner; version + 1, a new updated time, created kept', async () => {
      const created = await client.state.create(thing(id('a')), { owner: 'o' });
      const next = { ...created, metadata: { ...created.metadata, labels: { k: 'v2' } } };
      const updated = await client.state.update(next);
      expect(updated.metadata).toMatchObject({
        version: '2',
        owner: 'o',
        labels: { k: 'v2' },
        created: created.metadata.created,
      });
      expect(updated.metadata.updated).not.toBe(EPOCH);
      expect((await client.state.get(created.metadata)).metadata.version).toBe('2');
    });

    it('a stale version is FailedPrecondition, another owner PermissionDenied, missing resource NotFound', async () => {
      const created = await client.state.create(thing(id('a')), { owner: 'o' });
      const updated = await client.state.update(created);
      await expect(client.state.update(created)).rejects.toBeInstanceOf(FailedPreconditionError);
      await expect(client.state.update(updated, { owner: 'someone-else' })).rejects.toBeInstanceOf(
        PermissionDeniedError,
      );
      await expect(client.state.update(thing(id('missing'), { version: '1' }))).rejects.toBeInstanceOf(NotFoundError);
    });

    it('expected_phase: absent = any; a wrong one is InvalidArgument; a torn-down resource may run again', async () => {
      const created = await client.state.create(thing(id('a')));
      const torn = await client.state.update(
        { ...created, metadata: { ...created.metadata, phase: 'tearingDown' } },
        { expectedPhase: 'running' },
      );
      expect(torn.metadata.phase).toBe('tearingDown');
      await expect(client.state.update(torn, { expectedPhase: 'running' })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      const back = await client.state.update({ ...torn, metadata: { ...torn.metadata, phase: 'running' } });
      expect(back.metadata).toMatchObject({ phase: 'running', version: '3' });
    });

    it('Destroy: finalizers FailedPrecondition, other owner PermissionDenied; any phase; then NotFound', async () => {
      const created = await client.state.create(thing(id('a'), { finalizers: ['f'] }), { owner: 'o' });
      await expect(client.state.destroy(created.metadata, { owner: 'o' })).rejects.toBeInstanceOf(
        FailedPreconditionError,
      );
      const released = await client.state.update({ ...created, metadata: { ...created.metadata, finalizers: [] } });
      await expect(client.state.destroy(created.metadata, { owner: 'someone-else' })).rejects.toBeInstanceOf(
        PermissionDeniedError,
      );
      expect(released.metadata.phase).toBe('running');
      await client.state.destroy(created.metadata, { owner: 'o' });
      await expect(client.state.get(created.metadata)).rejects.toBeInstanceOf(NotFoundError);
      await expect(client.state.destroy(created.metadata, { owner: 'o' })).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('teardown (Get + Update of the phase) and removeFinalizers', () => {
    it('teardown keeps the owner and answers destroy-readiness; a second teardown writes nothing', async () => {
      const created = await client.state.create(thing(id('a'), { finalizers: ['f'] }), { owner: `${PROVIDER}.C` });
      expect(await client.state.teardown(created.metadata)).toBe(false);
      const torn = await client.state.get(created.metadata);
      expect(torn.metadata).toMatchObject({
        phase: 'tearingDown',
        owner: `${PROVIDER}.C`,
        version: '2',
        finalizers: ['f'],
      });
      expect(await client.state.teardown(created.metadata)).toBe(false);
      expect((await client.state.get(created.metadata)).metadata.version).toBe('2');
      await client.state.create(thing(id('b')));
      expect(await client.state.teardown(thing(id('b')).metadata)).toBe(true);
      await expect(client.state.teardown(thing(id('missing')).metadata)).rejects.toBeInstanceOf(NotFoundError);
      expect(client.stats().callsByMethod['Teardown']).toBeUndefined();
    });

    it('removeFinalizers: one Update, the rest kept in order with spec bytes; absent or gone need none', async () => {
      const created = await client.state.create(thing(id('a'), { finalizers: ['a', 'b', 'c'], phase: 'tearingDown' }), {
        owner: 'o',
      });
      const out = await client.state.removeFinalizers(created, ['b', 'x']);
      expect(out.outcome).toBe('removed');
      expect(out.after?.metadata).toMatchObject({
        finalizers: ['a', 'c'],
        version: '2',
        owner: 'o',
        phase: 'tearingDown',
      });
      expect(out.after?.spec.protoSpec).toEqual(OPAQUE);
      expect((await client.state.removeFinalizers(created.metadata, ['b'])).outcome).toBe('absent');
      // Nothing in the call ever found it by its ID: not evidence that it went (design rule 4).
      expect((await client.state.removeFinalizers(thing(id('missing')).metadata, ['b'])).outcome).toBe('not-found');
    });
  });

  describe('List with queries', () => {
    const seed = async () => {
      const labels: Record<string, Record<string, string>> = {
        a: { app: 'app1', frozen: '', weight: '10kg' },
        b: { app: 'app2', frozen: '', weight: '20kg' },
        c: { app: 'app3' },
      };
      // Created out of order: List answers sorted by ID.
      for (const name of ['c', 'a', 'b']) await client.state.create(thing(id(name), { labels: labels[name] ?? {} }));
    };
    const ids = async (labelQueries: LabelQuery[], idRegexp?: string) =>
      (await client.state.list(NS, TYPE, { labelQueries, idRegexp: idRegexp ?? `^${id('')}` })).map((r) =>
        r.metadata.id.slice(id('').length),
      );

    it('sorted by ID; label terms AND-ed, queries OR-ed; every operator as COSI evaluates it', async () => {
      await seed();
      expect(await ids([])).toEqual(['a', 'b', 'c']);
      expect(await ids([[{ key: 'frozen', op: 'EXISTS' }]])).toEqual(['a', 'b']);
      expect(await ids([[{ key: 'frozen', op: 'EXISTS', invert: true }]])).toEqual(['c']);
      expect(await ids([[{ key: 'frozen', op: 'NOT_EXISTS' }]])).toEqual(['c']);
      expect(
        await ids([
          [
            { key: 'frozen', op: 'EXISTS' },
            { key: 'app', op: 'EQUAL', value: ['app2'] },
          ],
        ]),
      ).toEqual(['b']);
      expect(
        await ids([[{ key: 'app', op: 'EQUAL', value: ['app2'] }], [{ key: 'app', op: 'EQUAL', value: ['app3'] }]]),
      ).toEqual(['b', 'c']);
      expect(await ids([[{ key: 'app', op: 'IN', value: ['app1', 'app3'] }]])).toEqual(['a', 'c']);
      expect(await ids([[{ key: 'app', op: 'LT', value: ['app2'] }]])).toEqual(['a']);
      expect(await ids([[{ key: 'app', op: 'LTE', value: ['app2'] }]])).toEqual(['a', 'b']);
      // Numbers with units: 10kg = 10 000, 20kg = 20 000; a missing label never matches, inverted or not.
      expect(await ids([[{ key: 'weight', op: 'LT_NUMERIC', value: ['12000'] }]])).toEqual(['a']);
      expect(await ids([[{ key: 'weight', op: 'LTE_NUMERIC', value: ['20k'] }]])).toEqual(['a', 'b']);
      expect(await ids([[{ key: 'weight', op: 'LT_NUMERIC', value: ['12000'], invert: true }]])).toEqual(['b']);
    });

    it('the ID query is an unanchored regexp; a bad one InvalidArgument; EQUAL without a value Internal', async () => {
      await seed();
      expect(await ids([], `${id('')}[bc]`)).toEqual(['b', 'c']);
      expect(await client.state.list(NS, TYPE, { idRegexp: 'no-such-id' })).toEqual([]);
      await expect(client.state.list(NS, TYPE, { idRegexp: '(' })).rejects.toBeInstanceOf(InvalidArgumentError);
      // The server indexes the missing value and recovers from the panic (Omni's recovery: Internal).
      await expect(
        client.state.list(NS, TYPE, { labelQueries: [[{ key: 'app', op: 'EQUAL', value: [] }]] }),
      ).rejects.toBeInstanceOf(InternalError);
    });
  });

  describe('Watch', () => {
    it('bootstrap: contents by ID, BOOTSTRAPPED, one batch; NOOP bookmark next; only markers bookmarked', async () => {
      await client.state.create(thing(id('b')));
      await client.state.create(thing(id('a')));
      const w = watch(client, { labelQueries: [[{ key: 'run', op: 'EQUAL', value: [id('')] }]] });
      await waitFor('the NOOP', () => w.events().some((e) => e.type === 'noop'));
      await client.state.create(thing(id('c'), { labels: { run: id('') } }));
      await waitFor('one event', () => w.batches.length >= 3);
      await w.stop();
      // Nothing of a and b: they lack the label; c arrived after the bootstrap.
      const [boot, noop, live] = w.batches;
      expect(boot?.map((e) => e.type)).toEqual(['bootstrapped']);
      expect(boot?.[0]?.resource.metadata).toMatchObject({ namespace: NS, type: TYPE, id: '', version: 'undefined' });
      expect(boot?.[0]?.bookmark?.length).toBeGreaterThan(0);
      expect(noop?.map((e) => e.type)).toEqual(['noop']);
      expect(noop?.[0]?.bookmark?.length).toBeGreaterThan(0);
      expect(live?.map((e) => `${e.type}:${e.resource.metadata.id}`)).toEqual([`created:${id('c')}`]);
      expect(live?.[0]?.bookmark?.length).toBeGreaterThan(0);

      const all = watch(client);
      await waitFor('the bootstrap', () => all.events().some((e) => e.type === 'bootstrapped'));
      await all.stop();
      const contents = all.batches[0] ?? [];
      const ours = contents.filter((e) => e.resource.metadata.id.startsWith(id('')));
      expect(ours.map((e) => `${e.type}:${e.resource.metadata.id}`)).toEqual([
        `created:${id('a')}`,
        `created:${id('b')}`,
        `created:${id('c')}`,
      ]);
      expect(contents.at(-1)?.type).toBe('bootstrapped');
      const createdIds = contents.filter((e) => e.type === 'created').map((e) => e.resource.metadata.id);
      expect(createdIds).toEqual([...createdIds].sort());
      expect(contents.filter((e) => e.type === 'created').every((e) => e.bookmark === undefined)).toBe(true);
    });

    it('live events in order, bookmarked: CREATED, UPDATED with old resource, DESTROYED with last state', async () => {
      const w = watch(client);
      await waitFor('the bootstrap', () => w.events().some((e) => e.type === 'bootstrapped'));
      const created = await client.state.create(thing(id('a')), { owner: 'o' });
      const updated = await client.state.update({ ...created, metadata: { ...created.metadata, labels: { k: 'v' } } });
      await client.state.destroy(created.metadata, { owner: 'o' });
      await waitFor('three events', () => w.seen(id('a')).length >= 3);
      await w.stop();
      expect(w.seen(id('a'))).toEqual([`created:${id('a')}`, `updated:${id('a')}`, `destroyed:${id('a')}`]);
      const [c, u, d] = w.events().filter((e) => e.resource.metadata.id === id('a'));
      expect(u?.old?.metadata).toMatchObject({ version: '1', labels: {} });
      expect(u?.resource.metadata).toMatchObject({ version: '2', labels: { k: 'v' } });
      expect(d?.resource.metadata).toMatchObject({ version: updated.metadata.version, labels: { k: 'v' } });
      for (const e of [c, u, d]) expect(e?.bookmark?.length).toBeGreaterThan(0);
    });

    it('with a label query, an update starting or stopping a match is CREATED or DESTROYED without old', async () => {
      const w = watch(client, { labelQueries: [[{ key: 'match', op: 'EXISTS' }]] });
      await waitFor('the bootstrap', () => w.events().some((e) => e.type === 'bootstrapped'));
      const r = await client.state.create(thing(id('a')));
      const matching = await client.state.update({ ...r, metadata: { ...r.metadata, labels: { match: '' } } });
      const again = await client.state.update({
        ...matching,
        metadata: { ...matching.metadata, annotations: { x: 'y' } },
      });
      await client.state.update({ ...again, metadata: { ...again.metadata, labels: {} } });
      await waitFor('three events', () => w.seen(id('a')).length >= 3);
      await w.stop();
      expect(w.seen(id('a'))).toEqual([`created:${id('a')}`, `updated:${id('a')}`, `destroyed:${id('a')}`]);
      const [c, , d] = w.events().filter((e) => e.resource.metadata.id === id('a'));
      expect(c?.old).toBeUndefined();
      expect(d?.old).toBeUndefined();
    });

    it('aggregated: writes made together may share a batch, and none is lost or repeated', async () => {
      const w = watch(client);
      await waitFor('the bootstrap', () => w.events().some((e) => e.type === 'bootstrapped'));
      await Promise.all(['a', 'b', 'c', 'd', 'e'].map((x) => client.state.create(thing(id(x)))));
      await waitFor('five events', () => w.seen().filter((s) => s.includes(id(''))).length >= 5);
      await w.stop();
      expect(
        w
          .seen()
          .filter((s) => s.includes(id('')))
          .sort(),
      ).toEqual(['a', 'b', 'c', 'd', 'e'].map((x) => `created:${id(x)}`));
    });

    it('a cut stream is resumed from the last bookmark: no second bootstrap, every change once, in order', async () => {
      const w = watch(client);
      await waitFor('the bootstrap', () => w.events().some((e) => e.type === 'bootstrapped'));
      const a = await client.state.create(thing(id('a')));
      await waitFor('the first event', () => w.seen(id('a')).length === 1);
      const watches = () => proxy.seen.filter((q) => q.rpc === 'Watch').length;
      const before = watches();
      proxy.cut();
      // Written while the watch is down or coming back: the resumed watch must deliver them.
      const a2 = await client.state.update({ ...a, metadata: { ...a.metadata, labels: { k: '1' } } });
      await client.state.create(thing(id('b')));
      await waitFor('the resumed watch', () => watches() > before);
      await client.state.update({ ...a2, metadata: { ...a2.metadata, labels: { k: '2' } } });
      await waitFor('four events', () => w.seen().filter((s) => s.includes(id(''))).length >= 4);
      await w.stop();
      expect(w.seen().filter((s) => s.includes(id('')))).toEqual([
        `created:${id('a')}`,
        `updated:${id('a')}`,
        `created:${id('b')}`,
        `updated:${id('a')}`,
      ]);
      expect(w.events().filter((e) => e.type === 'bootstrapped')).toHaveLength(1);
      expect(w.resets()).toBe(0);
      const resumed = proxy.seen.filter((q) => q.rpc === 'Watch').at(-1)?.body as { options?: Record<string, unknown> };
      expect(resumed.options?.['start_from_bookmark']).toBeDefined();
      expect(resumed.options?.['bootstrap_contents']).toBeUndefined();
    });

    // In a namespace kept in memory (by COSI here, by Omni in infra-provider-ephemeral) a bookmark names
    // the process that made it. (Omni's etcd revisions do not: another etcd would take them.)
    it('a bookmark unknown to the server (another one, same address) is refused: reset, fresh bootstrap', async () => {
      const kind = { namespace: 'infra-provider-ephemeral', type: T.InfraProviderHealthStatus };
      const w = watch(client, {}, kind);
      await waitFor('the bootstrap', () => w.events().some((e) => e.type === 'bootstrapped'));
      const other = await backend.start(key);
      try {
        const c2 = await createOmniClient({
          endpoint: other.endpoint,
          key: key.serviceAccountKey,
          delay: noDelay,
          env: {},
        });
        const health: Resource = {
          metadata: newMetadata({ ...kind, id: PROVIDER }),
          spec: { protoSpec: new Uint8Array([18, 2, 111, 107]) },
        };
        await c2.state.create(health, { owner: `${PROVIDER}.ProviderHealthStatusController` });
        await c2.close();
        proxy.setUpstream(other.endpoint);
        proxy.cut();
        await waitFor('the second bootstrap', () => w.events().filter((e) => e.type === 'bootstrapped').length === 2);
        await w.stop();
        expect(w.resets()).toBe(1);
        const second = w.batches.find((b, i) => i > 0 && b.some((e) => e.type === 'bootstrapped'));
        expect(second?.map((e) => `${e.type}:${e.resource.metadata.id}`)).toEqual([
          `created:${PROVIDER}`,
          'bootstrapped:',
        ]);
        expect(w.failure()).toBeUndefined();
      } finally {
        await other.close();
      }
    });
  });

  it('a key the server does not know is Unauthenticated', async () => {
    const stranger = await generateKey(`infra-provider:${PROVIDER}`, { lifetimeSeconds: 3600 });
    const c = await createOmniClient({
      endpoint: proxy.endpoint,
      key: stranger.serviceAccountKey,
      delay: noDelay,
      env: {},
    });
    try {
      await expect(c.state.get(thing(id('a')).metadata)).rejects.toBeInstanceOf(UnauthenticatedError);
      await expect(c.state.list(NS, TYPE)).rejects.toBeInstanceOf(UnauthenticatedError);
    } finally {
      await c.close();
    }
  });
});
