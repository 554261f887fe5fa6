// One State conformance suite, modelled on COSI's own (cosi-project/runtime pkg/state/conformance,
// whose case names the tests here borrow), for the three in-memory COSI implementations in the repo:
//   - SimStore:     the simulated Omni's store (src/omni-sim/store/store.ts), in process (StoreState);
//   - FakeState:    the provider tests' double (test/helpers/fake-state.ts);
//   - GatewayState: the real client (src/omni-client) over the simulated Omni's /api gateway.
// The double cannot drift from the sim, nor the sim from what the client expects, without one of
// these failing. COSI's own suite judges the sim in test/omni-sim/cosi-conformance.peer.test.ts; this one holds the
// implementations of our own to the same rules.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient } from '../../src/omni-client/client.js';
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
} from '../../src/omni-api/errors.js';
import { newMetadata, T, type Metadata, type Resource } from '../../src/omni-api/resource.js';
import type { LabelQuery, State, WatchEvent } from '../../src/omni-api/state.js';
import { wrapCore } from '../../src/omni-client/wrap.js';
import { createSim } from '../../src/omni-sim/index.js';
import { FakeState } from '../helpers/fake-state.js';
import { noDelay } from '../helpers/fake-gateway.js';
import { StoreState } from '../helpers/store-state.js';

const PROVIDER = 'conf';
const NS = `infra-provider:${PROVIDER}`;
const TYPE = `Paths.${PROVIDER}.infraprovider.sidero.dev`;
const EPOCH = '1970-01-01T00:00:00Z';

interface Target {
  name: string;
  open(): Promise<{ state: State; close(): Promise<void> }>;
}

const TARGETS: Target[] = [
  { name: 'SimStore', open: async () => ({ state: wrapCore(new StoreState()), close: async () => undefined }) },
  { name: 'FakeState', open: async () => ({ state: new FakeState(), close: async () => undefined }) },
  {
    name: 'GatewayState over the sim',
    open: async () => {
      const sim = await createSim(`
omni: { version: "1.9.3" }
identities: [{ name: "infra-provider:${PROVIDER}", role: InfraProvider }]
resources:
  - { metadata: { namespace: infra-provider, type: ${T.InfraProvider}, id: ${PROVIDER} }, proto_spec: "" }
`);
      const client = await createOmniClient({
        endpoint: sim.endpoint,
        key: sim.keys[`infra-provider:${PROVIDER}`] ?? '',
        delay: noDelay,
        env: {},
      });
      return {
        state: client.state,
        close: async () => {
          await client.close();
          await sim.close();
        },
      };
    },
  },
];

const path = (id: string, init: Partial<Omit<Metadata, 'namespace' | 'type' | 'id'>> = {}): Resource => ({
  metadata: newMetadata({ namespace: NS, type: TYPE, id }, init),
  spec: { protoSpec: new Uint8Array([10, 1, 120]) },
});
const ptr = (id: string) => ({ namespace: NS, type: TYPE, id });
const ids = (rs: Resource[]) => rs.map((r) => r.metadata.id);

async function waitFor(what: string, pred: () => boolean, ms = 3_000): Promise<void> {
  for (const started = Date.now(); !pred();) {
    if (Date.now() - started > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function watch(
  state: State,
  opts: { labelQueries?: LabelQuery[]; idRegexp?: string; bootstrapContents?: boolean } = {},
) {
  const ac = new AbortController();
  const batches: WatchEvent[][] = [];
  const done = (async () => {
    for await (const b of state.watchKind(NS, TYPE, { ...opts, signal: ac.signal })) batches.push(b);
  })();
  const events = () => batches.flat();
  return {
    batches,
    events,
    live: () =>
      events()
        .filter((e) => e.type !== 'bootstrapped' && e.type !== 'noop')
        .map((e) => `${e.type}:${e.resource.metadata.id}`),
    bootstrapped: () => waitFor('the bootstrap', () => events().some((e) => e.type === 'noop')),
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}

describe.each(TARGETS)('State conformance: $name', (target) => {
  let state: State;
  let close: () => Promise<void>;
  beforeEach(async () => {
    ({ state, close } = await target.open());
  });
  afterEach(async () => {
    await close();
  });

  it('TestCRD: create, read, list sorted by ID, destroy; NotFound and AlreadyExists', async () => {
    await expect(state.get(ptr('var/run'))).rejects.toBeInstanceOf(NotFoundError);
    expect(await state.list(NS, TYPE)).toEqual([]);
    await state.create(path('var/run'));
    await state.create(path('var/lib'));
    expect((await state.get(ptr('var/run'))).metadata.id).toBe('var/run');
    expect(ids(await state.list(NS, TYPE))).toEqual(['var/lib', 'var/run']);
    await expect(state.create(path('var/run'))).rejects.toBeInstanceOf(AlreadyExistsError);
    expect(await state.teardown(ptr('var/run'))).toBe(true);
    await state.destroy(ptr('var/run'));
    await expect(state.teardown(ptr('var/run'))).rejects.toBeInstanceOf(NotFoundError);
    await expect(state.destroy(ptr('var/run'))).rejects.toBeInstanceOf(NotFoundError);
    await expect(state.get(ptr('var/run'))).rejects.toBeInstanceOf(NotFoundError);
    expect(ids(await state.list(NS, TYPE))).toEqual(['var/lib']);
    await state.create(path('var/run'));
    expect((await state.get(ptr('var/run'))).metadata.version).toBe('1');
  });

  it('TestUpdate: versions start at 1 and grow by 1; older or newer is a conflict; NotFound when absent', async () => {
    await expect(state.update(path('tmp/path1', { version: '1' }))).rejects.toBeInstanceOf(NotFoundError);
    const v1 = await state.create(path('tmp/path1'));
    expect(v1.metadata.version).toBe('1');
    const v2 = await state.update(v1);
    expect(v2.metadata.version).toBe('2');
    await expect(state.update(v1)).rejects.toBeInstanceOf(FailedPreconditionError);
    await expect(state.update({ ...v2, metadata: { ...v2.metadata, version: '3' } })).rejects.toBeInstanceOf(
      FailedPreconditionError,
    );
    expect((await state.update(v2)).metadata.version).toBe('3');
    expect((await state.get(ptr('tmp/path1'))).metadata.version).toBe('3');
  });

  it('concurrent updates from one read: exactly one wins, the others are version conflicts', async () => {
    const read = await state.create(path('race'));
    const results = await Promise.allSettled(
      [1, 2, 3, 4].map((n) => state.update({ ...read, metadata: { ...read.metadata, labels: { n: String(n) } } })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(FailedPreconditionError);
    expect((await state.get(ptr('race'))).metadata.version).toBe('2');
  });

  it("TestCRDWithOwners: the owner option; another owner's Update/Destroy PermissionDenied; stored owner", async () => {
    await state.create(path('owner1/var/run'), { owner: 'owner1' });
    const r = await state.get(ptr('owner1/var/run'));
    expect(r.metadata.owner).toBe('owner1');
    await expect(state.update(r, { owner: '' })).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(state.update(r, { owner: 'owner2' })).rejects.toBeInstanceOf(PermissionDeniedError);
    const updated = await state.update(r);
    expect(updated.metadata).toMatchObject({ owner: 'owner1', version: '2' });
    await expect(state.destroy(ptr('owner1/var/run'))).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(state.destroy(ptr('owner1/var/run'), { owner: 'owner2' })).rejects.toBeInstanceOf(
      PermissionDeniedError,
    );
    // Teardown acts as the current owner.
    expect(await state.teardown(ptr('owner1/var/run'))).toBe(true);
    expect((await state.get(ptr('owner1/var/run'))).metadata.owner).toBe('owner1');
    await state.destroy(ptr('owner1/var/run'), { owner: 'owner1' });
  });

  it('phases: teardown sets tearingDown once; expected_phase checked if given, any phase written if not', async () => {
    await state.create(path('tmp/phase'));
    expect(await state.teardown(ptr('tmp/phase'))).toBe(true);
    const torn = await state.get(ptr('tmp/phase'));
    expect(torn.metadata).toMatchObject({ phase: 'tearingDown', version: '2' });
    expect(await state.teardown(ptr('tmp/phase'))).toBe(true);
    expect((await state.get(ptr('tmp/phase'))).metadata.version).toBe('2');
    await expect(state.update(torn, { expectedPhase: 'running' })).rejects.toBeInstanceOf(InvalidArgumentError);
    const again = await state.update(torn, { expectedPhase: 'tearingDown' });
    const running = await state.update({ ...again, metadata: { ...again.metadata, phase: 'running' } });
    expect(running.metadata).toMatchObject({ phase: 'running', version: '4' });
  });

  it('TestTeardownDestroy: no Destroy while finalizers remain; teardown says whether destroy may follow', async () => {
    const r = await state.create(path('tmp/1', { finalizers: ['A'] }));
    await expect(state.destroy(ptr('tmp/1'))).rejects.toBeInstanceOf(FailedPreconditionError);
    expect(await state.teardown(ptr('tmp/1'))).toBe(false);
    expect(await state.teardown(ptr('tmp/1'))).toBe(false);
    await expect(state.destroy(ptr('tmp/1'))).rejects.toBeInstanceOf(FailedPreconditionError);
    const torn = await state.get(ptr('tmp/1'));
    await state.update({ ...torn, metadata: { ...torn.metadata, finalizers: [] } });
    expect(await state.teardown(ptr('tmp/1'))).toBe(true);
    await state.destroy(ptr('tmp/1'));
    expect(r.metadata.finalizers).toEqual(['A']);
  });

  it('TestRemoveFinalizer (wrap.ts): stale read re-read on conflict; absent, phase-changed write nothing', async () => {
    const v1 = await state.create(path('fin/a', { finalizers: ['A', 'B', 'keep'] }));
    // Someone else writes between our read and our Update.
    await state.update({ ...v1, metadata: { ...v1.metadata, labels: { by: 'someone' } } });
    const r = await state.removeFinalizers(v1, ['A', 'B']);
    expect(r).toMatchObject({
      outcome: 'removed',
      attempts: 2,
      before: { metadata: { version: '2' } },
      after: { metadata: { version: '3', finalizers: ['keep'], labels: { by: 'someone' } } },
    });
    expect(await state.removeFinalizers(ptr('fin/a'), ['A'])).toMatchObject({ outcome: 'absent', attempts: 0 });
    expect(await state.removeFinalizers(ptr('fin/a'), ['keep'], { requirePhase: 'tearingDown' })).toMatchObject({
      outcome: 'phase-changed',
      attempts: 0,
    });
    expect((await state.get(ptr('fin/a'))).metadata).toMatchObject({ version: '3', finalizers: ['keep'] });
  });

  it('TestRemoveFinalizer: owner changed meanwhile (PermissionDenied or conflict): retried as new owner', async () => {
    const v1 = await state.create(path('fin/owned', { finalizers: ['A'] }), { owner: 'o1' });
    await state.update({ ...v1, metadata: { ...v1.metadata, owner: 'o2' } }, { owner: 'o1' });
    const r = await state.removeFinalizers(v1, ['A']);
    expect(r).toMatchObject({
      outcome: 'removed',
      attempts: 2,
      after: { metadata: { owner: 'o2', version: '3', finalizers: [] } },
    });
  });

  it('NotFound is done only for a resource read by ID (rule 4): not-found if no Get of the call found it', async () => {
    // As a List would have shown it: never read by its ID.
    const listed = path('fin/never', { version: '4', finalizers: ['A'] });
    expect(await state.removeFinalizers(listed, ['A'])).toMatchObject({ outcome: 'not-found', attempts: 1 });
    expect(await state.removeFinalizers(ptr('fin/never'), ['A'])).toMatchObject({ outcome: 'not-found', attempts: 0 });
    const r = await state.updateWithConflicts(ptr('fin/never'), (cur) => cur);
    expect(r.outcome).toBe('not-found');
    expect(r).toMatchObject({ error: expect.any(NotFoundError) });
    await expect(state.teardown(ptr('fin/never'))).rejects.toBeInstanceOf(NotFoundError);
  });

  it('timestamps: created set on Create, kept; updated as sent on Create (else the epoch), set on Update', async () => {
    const before = Date.now() - 60_000;
    const a = await state.create(path('ts/a'));
    expect(a.metadata.updated).toBe(EPOCH);
    expect(Date.parse(a.metadata.created ?? '')).toBeGreaterThan(before);
    const b = await state.create(path('ts/b', { updated: '2026-03-01T10:00:00Z' }));
    expect(b.metadata.updated).toBe('2026-03-01T10:00:00Z');
    const a2 = await state.update(a);
    expect(a2.metadata.created).toBe(a.metadata.created);
    expect(Date.parse(a2.metadata.updated ?? '')).toBeGreaterThan(before);
  });

  it('TestLabels: terms AND-ed, queries OR-ed, every operator, numbers with units', async () => {
    await state.create(path('labeled/app1', { labels: { app: 'app1', frozen: '', weight: '10kg' } }));
    await state.create(path('labeled/app2', { labels: { app: 'app2', frozen: '', weight: '20kg' } }));
    await state.create(path('labeled/app3', { labels: { app: 'app3' } }));
    const q = async (labelQueries: LabelQuery[]) =>
      ids(await state.list(NS, TYPE, { labelQueries })).map((x) => x.slice('labeled/'.length));
    expect(await q([[{ key: 'frozen', op: 'EXISTS' }]])).toEqual(['app1', 'app2']);
    expect(
      await q([
        [
          { key: 'frozen', op: 'EXISTS' },
          { key: 'app', op: 'EQUAL', value: ['app2'] },
        ],
      ]),
    ).toEqual(['app2']);
    expect(
      await q([
        [
          { key: 'frozen', op: 'EXISTS' },
          { key: 'app', op: 'EQUAL', value: ['app3'] },
        ],
      ]),
    ).toEqual([]);
    expect(await q([[{ key: 'app', op: 'IN', value: ['app2', 'app3'] }]])).toEqual(['app2', 'app3']);
    expect(await q([[{ key: 'weight', op: 'LT_NUMERIC', value: ['12000'] }]])).toEqual(['app1']);
    expect(await q([[{ key: 'weight', op: 'LTE_NUMERIC', value: ['20000'] }]])).toEqual(['app1', 'app2']);
    expect(await q([[{ key: 'app', op: 'LTE', value: ['app2'] }]])).toEqual(['app1', 'app2']);
    expect(await q([[{ key: 'app', op: 'LT', value: ['app2'] }]])).toEqual(['app1']);
    expect(
      await q([[{ key: 'app', op: 'EQUAL', value: ['app2'] }], [{ key: 'app', op: 'EQUAL', value: ['app3'] }]]),
    ).toEqual(['app2', 'app3']);
    expect(await q([[{ key: 'frozen', op: 'EXISTS', invert: true }]])).toEqual(['app3']);
    expect(await q([[{ key: 'weight', op: 'LT_NUMERIC', value: ['12000'], invert: true }]])).toEqual(['app2']);
  });

  it('TestIDQuery: an unanchored regexp on the ID, for List and for a watch', async () => {
    for (let i = 0; i < 10; i++) await state.create(path(`idquery/path${i}`));
    expect(ids(await state.list(NS, TYPE, { idRegexp: '^idquery/.+[2-4]$' }))).toEqual([
      'idquery/path2',
      'idquery/path3',
      'idquery/path4',
    ]);
    expect(ids(await state.list(NS, TYPE, { idRegexp: 'path[89]' }))).toEqual(['idquery/path8', 'idquery/path9']);
    const w = watch(state, { idRegexp: '^idquery/.+[2-4]$' });
    await w.bootstrapped();
    for (let i = 0; i < 10; i++) await state.destroy(ptr(`idquery/path${i}`));
    await waitFor('three destroyed events', () => w.live().filter((e) => e.startsWith('destroyed')).length >= 3);
    await w.stop();
    expect(w.live()).toEqual([
      'created:idquery/path2',
      'created:idquery/path3',
      'created:idquery/path4',
      'destroyed:idquery/path2',
      'destroyed:idquery/path3',
      'destroyed:idquery/path4',
    ]);
  });

  it('TestWatchKind bootstrap: contents by ID, BOOTSTRAPPED in one batch, NOOP next, then every change', async () => {
    await state.create(path('var/tmp'));
    await state.create(path('var/db'));
    const w = watch(state);
    await w.bootstrapped();
    const [boot, noop] = w.batches;
    expect(boot?.map((e) => `${e.type}:${e.resource.metadata.id}`)).toEqual([
      'created:var/db',
      'created:var/tmp',
      'bootstrapped:',
    ]);
    expect(boot?.[2]?.resource.metadata).toMatchObject({ namespace: NS, type: TYPE, id: '', version: 'undefined' });
    expect(noop?.map((e) => e.type)).toEqual(['noop']);
    // Bookmarks: on the markers, never on the contents.
    expect(boot?.map((e) => e.bookmark !== undefined)).toEqual([false, false, true]);
    expect(noop?.[0]?.bookmark).toBeDefined();

    const created = await state.create(path('var/run'), { owner: 'o' });
    const updated = await state.update(created);
    expect(await state.teardown(ptr('var/run'))).toBe(true);
    await state.destroy(ptr('var/run'), { owner: 'o' });
    await waitFor('the four changes', () => w.live().length >= 6);
    await w.stop();
    expect(w.live()).toEqual([
      'created:var/db',
      'created:var/tmp',
      'created:var/run',
      'updated:var/run',
      'updated:var/run',
      'destroyed:var/run',
    ]);
    const run = w.events().filter((e) => e.resource.metadata.id === 'var/run');
    expect(run.map((e) => e.resource.metadata.version)).toEqual(['1', '2', '3', '3']);
    expect(run.map((e) => e.old?.metadata.version)).toEqual([undefined, '1', '2', undefined]);
    expect(run[3]?.resource.metadata.phase).toBe('tearingDown');
    expect(run.every((e) => e.bookmark !== undefined)).toBe(true);
    expect(updated.metadata.version).toBe('2');
  });

  it('a watch without bootstrap contents: the BOOTSTRAPPED marker alone, then the changes', async () => {
    await state.create(path('before'));
    const w = watch(state, { bootstrapContents: false });
    await waitFor('the NOOP', () => w.events().some((e) => e.type === 'noop'));
    await state.create(path('after'));
    await waitFor('one event', () => w.live().length >= 1);
    await w.stop();
    expect(
      w
        .events()
        .map((e) => e.type)
        .filter((t) => t === 'bootstrapped'),
    ).toEqual([]);
    expect(w.live()).toEqual(['created:after']);
  });

  it('every change reaches a watch, in order, none dropped or repeated, however fast they come', async () => {
    const w = watch(state);
    await w.bootstrapped();
    let r = await state.create(path('burst'));
    for (let i = 0; i < 25; i++)
      r = await state.update({ ...r, metadata: { ...r.metadata, labels: { i: String(i) } } });
    await waitFor('26 events', () => w.live().length >= 26);
    await w.stop();
    expect(
      w
        .events()
        .filter((e) => e.resource.metadata.id === 'burst')
        .map((e) => e.resource.metadata.version),
    ).toEqual(Array.from({ length: 26 }, (_, i) => String(i + 1)));
  });

  it('TestWatchKindWithLabels: an update starting or stopping a match: CREATED or DESTROYED without old', async () => {
    await state.create(path('var/label1', { labels: { label: 'label1', common: 'app' } }));
    const w1 = watch(state, { labelQueries: [[{ key: 'label', op: 'EQUAL', value: ['label1'] }]] });
    const common = watch(state, { labelQueries: [[{ key: 'common', op: 'EXISTS' }]] });
    const or = watch(state, {
      labelQueries: [
        [{ key: 'label', op: 'EQUAL', value: ['label2'] }],
        [{ key: 'label', op: 'EQUAL', value: ['label3'] }],
      ],
    });
    for (const w of [w1, common, or]) await w.bootstrapped();
    await state.create(path('var/label2', { labels: { label: 'label2', common: 'app' } }));
    const p3 = await state.create(path('var/label3', { labels: { label: 'label3' } }));
    await state.update({ ...p3, metadata: { ...p3.metadata, labels: { ...p3.metadata.labels, common: 'foo' } } });
    const p1 = await state.get(ptr('var/label1'));
    const p1b = await state.update({
      ...p1,
      metadata: { ...p1.metadata, labels: { ...p1.metadata.labels, app: 'app-awesome' } },
    });
    const { common: _drop, ...rest } = p1b.metadata.labels;
    await state.update({ ...p1b, metadata: { ...p1b.metadata, labels: rest } });
    await waitFor('the events', () => w1.live().length >= 3 && common.live().length >= 5 && or.live().length >= 3);
    for (const w of [w1, common, or]) await w.stop();
    expect(w1.live()).toEqual(['created:var/label1', 'updated:var/label1', 'updated:var/label1']);
    expect(common.live()).toEqual([
      'created:var/label1',
      'created:var/label2',
      'created:var/label3',
      'updated:var/label1',
      'destroyed:var/label1',
    ]);
    expect(or.live()).toEqual(['created:var/label2', 'created:var/label3', 'updated:var/label3']);
    const synthetic = common
      .events()
      .filter((e) => e.type !== 'noop' && e.type !== 'bootstrapped' && e.type !== 'updated');
    expect(synthetic.every((e) => e.old === undefined)).toBe(true);
  });
});
