// The sim's back-pressure over real HTTP on loopback: Omni 1.9's write budget (a write waits for
// its bytes and is applied; one that cannot have them before min(Grpc-Timeout, maxWait) is refused at
// once with DeadlineExceeded; one over the burst with ResourceExhausted; a client gone while it waits
// leaves nothing applied), and a proxy answering 429 / 503 with Retry-After. What the client makes
// of each is asserted too: these are the signals the stub adapts to (omni-client/pressure.ts; the
// whole run under them: test/provider/back-pressure.test.ts).

import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../../src/omni-client/client.js';
import { DeadlineExceededError } from '../../../src/omni-api/errors.js';
import { ThrottledError, TransportError } from '../../../src/omni-client/errors.js';
import {
  newMetadata,
  NS_INFRA_PROVIDER_EPHEMERAL,
  providerNamespace,
  providerType,
  T,
  type Resource,
} from '../../../src/omni-api/resource.js';
import { encodeSpec } from '../../../src/omni-api/specs/codec.js';
import { InfraProviderHealthStatusSpec } from '../../../src/omni-api/specs/messages.js';
import { providerRegistration } from '../../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../../src/omni-sim/index.js';
import { marshaledSize } from '../../../src/omni-sim/store/marshaled-size.js';
import { noDelay } from '../../helpers/fake-gateway.js';
import { rawCall, signHeaders, type RawKey } from '../../helpers/raw-client.js';

const ID = 'p';
const NS = providerNamespace(ID);
const TYPE = providerType('Thing', ID);
let sim: Sim;
let client: OmniClient;
let key: RawKey;

beforeAll(async () => {
  sim = await createSim({
    omniVersion: '1.9.3',
    identities: [
      { name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] },
      { name: 'admin@example.org', role: 'Admin', publicKeys: [] },
    ],
    resources: providerRegistration(ID, { static: true }),
    faults: {},
  });
  // No retries of the transport's, nor of a throttled write's: each signal is seen as it is.
  client = await createOmniClient({
    endpoint: sim.endpoint,
    key: sim.keys[`infra-provider:${ID}`]!,
    delay: noDelay,
    env: {},
    retries: 0,
    backPressure: { retries: 0 },
  });
  const k = sim.generatedKeys[`infra-provider:${ID}`]!;
  key = { name: k.name, armoredPrivateKey: k.armoredPrivateKey };
});
afterEach(() => sim.faults.reset());
afterAll(async () => {
  await client?.close();
  await sim?.close();
});

let n = 0;
const thing = (): Resource => ({
  metadata: newMetadata({ namespace: NS, type: TYPE, id: `t${n++}` }),
  spec: { protoSpec: new Uint8Array(0) },
});
/** What a Create of `r` costs (the stored resource: version 1, created now; within a byte or two). */
const cost = (r: Resource) =>
  marshaledSize({
    ...r,
    metadata: { ...r.metadata, version: '1', created: '2026-12-01T10:00:00Z', updated: '1970-01-01T00:00:00Z' },
  });
const wire = (r: Resource) => ({
  metadata: {
    namespace: r.metadata.namespace,
    type: r.metadata.type,
    id: r.metadata.id,
    version: 'undefined',
    phase: 'running',
  },
  spec: {},
});
const exists = (r: Resource) => sim.store.peek(r.metadata) !== undefined;

/** One Create of a provider resource: with the burst set to about its cost, the bucket is then empty. */
async function drain(): Promise<void> {
  await client.state.create(thing());
}

describe("Omni's write budget", () => {
  it('writes wait for their bytes, in turn, and are all applied; the stats say how long', async () => {
    const one = cost(thing());
    // Each write after the first waits about a fifth of a second for its bytes.
    sim.faults.set({ throttle: { infraProvider: { bytesPerSecond: one * 5, burst: one + 8 } } });
    const rs = [thing(), thing(), thing()];
    const t0 = performance.now();
    await Promise.all(rs.map((r) => client.state.create(r)));
    const ms = performance.now() - t0;
    expect(rs.every(exists)).toBe(true);
    expect(ms).toBeGreaterThan(300);
    expect(ms).toBeLessThan(5000);
    const s = sim.faults.throttle!.stats().infraProvider;
    expect(s).toMatchObject({ admitted: 3, waited: 2, failedTimeout: 0 });
    expect(s.waitedMs).toBeGreaterThan(300);
  });

  it("Omni's in-memory kinds are not charged: a heartbeat goes through an empty bucket", async () => {
    sim.faults.set({ throttle: { infraProvider: { bytesPerSecond: 1, burst: cost(thing()) + 8 }, maxWaitMs: 100 } });
    await drain(); // a charged write would now fail: its bytes are minutes away
    const p = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: ID };
    const spec = encodeSpec(InfraProviderHealthStatusSpec, {
      last_heartbeat_timestamp: new Date().toISOString(),
      error: '',
    });
    await client.state.create(
      { metadata: newMetadata(p), spec: { protoSpec: spec } },
      { owner: `${ID}.ProviderHealthStatusController` },
    );
    expect(sim.store.peek(p)).toBeDefined();
    expect(sim.faults.throttle!.stats().infraProvider).toMatchObject({ admitted: 1, failedTimeout: 0 });
  });

  it("a wait longer than the Grpc-Timeout: DeadlineExceeded (504) at once, Omni's words, nothing applied", async () => {
    const one = cost(thing());
    sim.faults.set({ throttle: { infraProvider: { bytesPerSecond: Math.ceil(one / 2), burst: one + 8 } } });
    await drain();
    const r = thing();
    const t0 = performance.now();
    const res = await rawCall(
      sim.endpoint,
      key,
      'Create',
      { resource: wire(r) },
      { headers: { 'grpc-timeout': '500m' } },
    );
    expect(performance.now() - t0).toBeLessThan(450);
    expect(res.status).toBe(504);
    expect((res.json as { code: number }).code).toBe(4);
    expect((res.json as { message: string }).message).toMatch(
      new RegExp(
        `^etcd write throttled out after 0\\.00\\ds \\(class=infraprovider, type=${TYPE.replace(/\./g, '\\.')}, ` +
          `bytes=\\d+\\): rate: Wait\\(n=\\d+\\) would exceed context deadline$`,
      ),
    );
    expect(exists(r)).toBe(false);
    // A Grpc-Timeout long enough: it waits and is applied.
    const ok = await rawCall(
      sim.endpoint,
      key,
      'Create',
      { resource: wire(r) },
      { headers: { 'grpc-timeout': '10S' } },
    );
    expect(ok.status).toBe(200);
    expect(exists(r)).toBe(true);
  });

  it('no Grpc-Timeout: maxWait bounds it; Create read back (NotFound), out of retries gives up naming it', async () => {
    const one = cost(thing());
    sim.faults.set({
      throttle: { infraProvider: { bytesPerSecond: Math.ceil(one / 2), burst: one + 8 }, maxWaitMs: 200 },
    });
    await drain();
    const r = thing();
    const e = await client.state.create(r).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ThrottledError);
    expect((e as Error).message).toMatch(
      /^Create .*: throttled by Omni: .*DeadlineExceeded: etcd write throttled out after/,
    );
    expect((e as Error).cause).toBeInstanceOf(DeadlineExceededError);
    expect(exists(r)).toBe(false);
    expect(sim.faults.throttle!.stats().infraProvider.failedTimeout).toBe(1);
  });

  it('a write larger than the burst: ResourceExhausted (429)', async () => {
    sim.faults.set({ throttle: { infraProvider: { bytesPerSecond: 1_000_000, burst: 50 } } });
    const res = await rawCall(sim.endpoint, key, 'Create', { resource: wire(thing()) });
    expect([res.status, (res.json as { code: number }).code]).toEqual([429, 8]);
    expect((res.json as { message: string }).message).toMatch(
      /^etcd write payload \(\d+ bytes\) exceeds the configured burst \(50\) for class=infraprovider, type=/,
    );
  });

  it('a client that goes away while its write waits: the write is never applied', async () => {
    const one = cost(thing());
    sim.faults.set({ throttle: { infraProvider: { bytesPerSecond: Math.ceil(one * 2), burst: one + 8 } } });
    await drain();
    await drain(); // the bucket now owes half a second
    const r = thing();
    const ac = new AbortController();
    const headers = await signHeaders(key, '/cosi.resource.State/Create');
    const pending = request(`${sim.endpoint}/api/cosi.resource.State/Create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ resource: wire(r) }),
      signal: ac.signal,
    }).catch((x: unknown) => x);
    await new Promise((res) => setTimeout(res, 100));
    ac.abort();
    await pending;
    await new Promise((res) => setTimeout(res, 1500));
    expect(exists(r)).toBe(false);
    expect(sim.faults.throttle!.stats().infraProvider.abandoned).toBe(1);
  });

  it('a malformed Grpc-Timeout is refused as grpc-gateway refuses it', async () => {
    const res = await rawCall(
      sim.endpoint,
      key,
      'Get',
      { namespace: NS, type: TYPE, id: 'x' },
      { headers: { 'grpc-timeout': '5s' } },
    );
    expect([res.status, res.json]).toEqual([400, { code: 3, message: 'invalid grpc-timeout: 5s' }]);
  });
});

describe('a proxy that limits requests', () => {
  it('empty bucket: 429, Retry-After, own body; the client takes it as back-pressure with Retry-After', async () => {
    sim.faults.set({ proxyLimit: { requestsPerSecond: 0, burst: 1, status: 429, retryAfterS: 3 } });
    const first = await rawCall(sim.endpoint, key, 'Get', { namespace: NS, type: TYPE, id: 'x' });
    expect(first.status).toBe(404);
    const refused = await rawCall(sim.endpoint, key, 'Get', { namespace: NS, type: TYPE, id: 'x' });
    expect([refused.status, refused.headers['retry-after'], refused.text]).toEqual([
      429,
      '3',
      '429 Too Many Requests\n',
    ]);
    // The Create's 429 is a signal; reading it back is refused by the proxy too (a read, not retried
    // here with retries: 0), and that refusal ends the write: nothing concluded, nothing sent again.
    const signals = client.throttling().signals;
    const e = await client.state.create(thing()).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TransportError);
    expect(e).toMatchObject({
      code: 'STUB_TRANSPORT',
      httpStatus: 429,
      retryAfterMs: 3000,
      retriable: true,
      method: '/cosi.resource.State/Get',
    });
    expect(client.throttling().signals).toBe(signals + 1);
    expect(sim.faults.proxyLimit!.stats()).toEqual({ passed: 1, refused: 3 });
    sim.faults.set({ proxyLimit: undefined });
    expect((await rawCall(sim.endpoint, key, 'Get', { namespace: NS, type: TYPE, id: 'x' })).status).toBe(404);
  });

  it('or 503 with Retry-After, which the client retries as a transport error, honouring Retry-After', async () => {
    sim.faults.set({ proxyLimit: { requestsPerSecond: 0, burst: 0, status: 503, retryAfterS: 1 } });
    const refused = await rawCall(sim.endpoint, key, 'Get', { namespace: NS, type: TYPE, id: 'x' });
    expect([refused.status, refused.headers['retry-after']]).toEqual([503, '1']);
    const e = await client.state.get({ namespace: NS, type: TYPE, id: 'x' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TransportError);
    expect(e).toMatchObject({ httpStatus: 503, retryAfterMs: 1000 });
  });
});
