// The sim's back-pressure (src/omni-sim/gateway/throttle.ts, proxy-limit.ts) on a clock of the test's own: Omni 1.9's
// write budget (a token bucket per caller class with golang.org/x/time/rate's reservations, charged
// by the marshaled size, refusing at once what cannot be had within min(deadline, maxWait)), its
// wiring into the store and the fault config, and the proxy's request limit.

import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError, ResourceExhaustedError } from '../../../src/omni-api/errors.js';
import { newMetadata, type Resource } from '../../../src/omni-api/resource.js';
import type { Identity } from '../../../src/omni-sim/api.js';
import { Faults } from '../../../src/omni-sim/gateway/faults.js';
import {
  faultConfigFromPlain,
  faultConfigToPlain,
  FaultConfigError,
} from '../../../src/omni-sim/gateway/fault-config.js';
import { SimStore } from '../../../src/omni-sim/store/store.js';
import {
  grpcTimeoutMs,
  ThrottleWait,
  throttled,
  WriteThrottle,
  type ThrottleCall,
} from '../../../src/omni-sim/gateway/throttle.js';
import { ProxyLimit } from '../../../src/omni-sim/gateway/proxy-limit.js';
import { marshaledSize } from '../../../src/omni-sim/store/marshaled-size.js';

const provider: Identity = {
  name: 'infra-provider:p',
  email: 'p@infra-provider.serviceaccount.omni.sidero.dev',
  role: 'InfraProvider',
  providerId: 'p',
};
const user: Identity = { name: 'u@example.org', email: 'u@example.org', role: 'Admin' };
const internal: Identity = { name: 'omni-internal', email: 'internal', role: 'Admin', internal: true };

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1000;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

const caught = (f: () => unknown): unknown => {
  try {
    f();
  } catch (e) {
    return e;
  }
  return undefined;
};

function res(id: string, extra: Partial<Resource['metadata']> = {}, spec = new Uint8Array([8, 1])): Resource {
  return {
    metadata: {
      ...newMetadata(
        { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id },
        { version: '3', created: '2026-12-01T10:00:00Z', updated: '2026-12-01T10:00:00.5Z' },
      ),
      ...extra,
    },
    spec: { protoSpec: spec },
  };
}

describe('marshaledSize', () => {
  it("is the protobuf of COSI's Resource (yaml_spec left out) and AES-GCM's 29 bytes", () => {
    const r = res('m1', { owner: 'o', finalizers: ['a.B', 'c.D'], labels: { k: 'v' } });
    r.spec.yamlSpec = 'not: charged\n';
    const md = new BinaryWriter();
    for (const [f, v] of [
      [1, 'infra-provider'],
      [2, 'InfraMachines.omni.sidero.dev'],
      [3, 'm1'],
      [4, '3'],
      [5, 'o'],
      [6, 'running'],
    ] as const)
      md.tag(f, 2).string(v);
    md.tag(7, 2)
      .fork()
      .tag(1, 0)
      .int64(Date.parse('2026-12-01T10:00:00Z') / 1000)
      .join();
    md.tag(8, 2)
      .fork()
      .tag(1, 0)
      .int64(Date.parse('2026-12-01T10:00:00Z') / 1000)
      .tag(2, 0)
      .int32(500_000_000)
      .join();
    md.tag(9, 2).string('a.B').tag(9, 2).string('c.D');
    md.tag(10, 2).fork().tag(1, 2).string('k').tag(2, 2).string('v').join();
    const whole = new BinaryWriter()
      .tag(1, 2)
      .bytes(md.finish())
      .tag(2, 2)
      .bytes(
        new BinaryWriter()
          .tag(1, 2)
          .bytes(new Uint8Array([8, 1]))
          .finish(),
      )
      .finish();
    expect(marshaledSize(r)).toBe(whole.length + 29);
  });

  it('grows with what the resource holds; 2 KiB and more is charged compressed', () => {
    // 102 bytes of field; the metadata's length prefix may grow by a byte.
    expect(marshaledSize(res('m1', { finalizers: ['x'.repeat(100)] })) - marshaledSize(res('m1'))).toBeOneOf([
      102, 103,
    ]);
    const big = res('m1', {}, new Uint8Array(10_000));
    expect(marshaledSize(big)).toBeLessThan(1000);
  });
});

describe('WriteThrottle', () => {
  const budget = (bytesPerSecond: number, burst: number) => ({ bytesPerSecond, burst });

  it('classes are charged apart; a class without a budget is never throttled', () => {
    const c = clock();
    const t = new WriteThrottle({ infraProvider: budget(100, 100) }, c.now);
    t.within({}, () => t.gate(provider, 'T', () => 100));
    expect(caught(() => t.within({}, () => t.gate(provider, 'T', () => 10)))).toBeInstanceOf(ThrottleWait);
    for (let i = 0; i < 5; i++) t.within({}, () => t.gate(user, 'T', () => 1000));
    expect(t.stats().user.admitted).toBe(0); // no bucket: not even counted
    expect(t.stats().infraProvider).toMatchObject({ admitted: 1, admittedBytes: 100 });
  });

  it("a write whose bytes cannot be had before its deadline fails at once with Omni's DeadlineExceeded", () => {
    const c = clock();
    const t = new WriteThrottle({ infraProvider: budget(100, 100) }, c.now);
    t.within({}, () => t.gate(provider, 'T', () => 100));
    const call: ThrottleCall = { deadline: c.now() + 500 };
    const e = caught(() => t.within(call, () => t.gate(provider, 'InfraMachines.omni.sidero.dev', () => 60)));
    expect(e).toBeInstanceOf(DeadlineExceededError);
    expect((e as DeadlineExceededError).omniMessage).toBe(
      'etcd write throttled out after 0.000s (class=infraprovider, type=InfraMachines.omni.sidero.dev, bytes=60): ' +
        'rate: Wait(n=60) would exceed context deadline',
    );
    // Nothing was taken: a write due within the deadline still gets its turn.
    const w = caught(() => t.within(call, () => t.gate(provider, 'T', () => 40)));
    expect((w as ThrottleWait).waitMs).toBe(400);
    expect(t.stats().infraProvider).toMatchObject({ failedTimeout: 1, failedTimeoutBytes: 60 });
  });

  it('maxWait bounds the wait of a call without a deadline (30 s by default; 0: no bound)', () => {
    const c = clock();
    const t = new WriteThrottle({ user: budget(10, 10) }, c.now);
    expect(t.maxWaitMs).toBe(30_000);
    t.within({}, () => t.gate(user, 'T', () => 10));
    expect((caught(() => t.within({}, () => t.gate(user, 'T', () => 10))) as ThrottleWait).waitMs).toBe(1000);
    const short = new WriteThrottle({ user: budget(10, 10), maxWaitMs: 500 }, c.now);
    short.within({}, () => short.gate(user, 'T', () => 10));
    expect(caught(() => short.within({}, () => short.gate(user, 'T', () => 10)))).toBeInstanceOf(DeadlineExceededError);
    const none = new WriteThrottle({ user: budget(1, 10), maxWaitMs: 0 }, c.now);
    none.within({}, () => none.gate(user, 'T', () => 10));
    expect((caught(() => none.within({}, () => none.gate(user, 'T', () => 10))) as ThrottleWait).waitMs).toBe(10_000);
  });

  it('a write larger than the burst is ResourceExhausted: no wait would let it through', () => {
    const t = new WriteThrottle({ infraProvider: budget(100, 100) }, clock().now);
    const e = caught(() => t.within({}, () => t.gate(provider, 'T', () => 101)));
    expect(e).toBeInstanceOf(ResourceExhaustedError);
    expect((e as ResourceExhaustedError).omniMessage).toBe(
      'etcd write payload (101 bytes) exceeds the configured burst (100) for class=infraprovider, type=T',
    );
  });

  it("Omni's own controllers are charged but never wait (the sim's controllers are synchronous)", () => {
    const c = clock();
    const t = new WriteThrottle({ internal: budget(100, 100), infraProvider: budget(100, 100) }, c.now);
    for (let i = 0; i < 3; i++) t.within({}, () => t.gate(internal, 'T', () => 100));
    expect(t.stats().internal).toMatchObject({ admitted: 3, admittedBytes: 300 });
    t.within({}, () => t.gate(provider, 'T', () => 100)); // another class's bucket: still full
  });

  it('throttled(): waits, resends with its bytes reserved, counts the wait; a caller gone frees them', async () => {
    const c = clock();
    const t = new WriteThrottle({ infraProvider: budget(100, 100) }, c.now);
    t.within({}, () => t.gate(provider, 'T', () => 100));
    const waits: number[] = [];
    let applied = 0;
    const resent: boolean[] = [];
    const write = () => {
      resent.push(t.resending());
      t.gate(provider, 'T', () => 50);
      return ++applied;
    };
    await expect(
      throttled(
        t,
        {},
        async (ms) => {
          waits.push(ms);
          c.advance(ms);
          return true;
        },
        write,
      ),
    ).resolves.toBe(1);
    expect(waits).toEqual([500]);
    expect(resent).toEqual([false, true]);
    expect(t.stats().infraProvider).toMatchObject({ admitted: 2, admittedBytes: 150, waited: 1, waitedMs: 500 });
    await expect(throttled(t, {}, async () => false, write)).rejects.toMatchObject({ grpcCode: 1 });
    expect(applied).toBe(1);
    expect(t.stats().infraProvider.abandoned).toBe(1);
    // What the abandoned write had reserved is there again: the next one waits as if it never came.
    expect((caught(() => t.within({}, () => t.gate(provider, 'T', () => 50))) as ThrottleWait).waitMs).toBe(500);
  });
});

describe('the store charges what Omni charges', () => {
  it('etcd writes after checks (Create before existence check), Destroy by what it deletes; in-memory never', () => {
    const seen: [string, number][] = [];
    const store = new SimStore({
      clock: { now: () => 0 },
      writeGate: (who, type, bytes) => {
        seen.push([`${who.name} ${type}`, bytes()]);
      },
    });
    const r = res('m1');
    const created = store.create(provider, r, '');
    expect(seen).toEqual([[`infra-provider:p ${r.metadata.type}`, marshaledSize(created)]]);
    expect(caught(() => store.create(provider, r, ''))).toBeDefined();
    expect(seen).toHaveLength(2);
    expect(
      caught(() => store.update(provider, { ...created, metadata: { ...created.metadata, version: '7' } }, '')),
    ).toBeDefined();
    expect(seen).toHaveLength(2); // a version conflict is refused before the limiter
    const updated = store.update(provider, { ...created, metadata: { ...created.metadata, labels: { a: 'b' } } }, '');
    expect(seen[2]?.[1]).toBe(marshaledSize(updated));
    store.destroy(provider, updated.metadata, '');
    expect(seen[3]?.[1]).toBe(marshaledSize(updated));
    store.create(
      provider,
      {
        ...res('h1'),
        metadata: {
          ...res('h1').metadata,
          namespace: 'infra-provider-ephemeral',
          type: 'InfraProviderHealthStatuses.omni.sidero.dev',
        },
      },
      '',
    );
    expect(seen).toHaveLength(4);
  });

  it('a gate that throws leaves the store unchanged', () => {
    let refuse = false;
    const store = new SimStore({
      clock: { now: () => 0 },
      writeGate: () => {
        if (refuse) throw new Error('no');
      },
    });
    const created = store.create(provider, res('m1'), '');
    refuse = true;
    expect(
      caught(() => store.update(provider, { ...created, metadata: { ...created.metadata, labels: { a: 'b' } } }, '')),
    ).toBeDefined();
    expect(caught(() => store.destroy(provider, created.metadata, ''))).toBeDefined();
    expect(store.peek(created.metadata)).toEqual(created);
  });
});

describe('grpcTimeoutMs', () => {
  it('reads the units grpc-gateway reads; refuses anything else in its words', () => {
    expect(grpcTimeoutMs(undefined)).toBeUndefined();
    expect([
      grpcTimeoutMs('2S'),
      grpcTimeoutMs('1M'),
      grpcTimeoutMs('1H'),
      grpcTimeoutMs('250m'),
      grpcTimeoutMs('1500u'),
      grpcTimeoutMs('3000000n'),
    ]).toEqual([2000, 60_000, 3_600_000, 250, 1.5, 3]);
    for (const bad of ['5', 'S', '5s', '1.5S', '5 S'])
      expect(() => grpcTimeoutMs(bad)).toThrow(`invalid grpc-timeout: ${bad}`);
  });
});

describe('ProxyLimit', () => {
  it('lets the burst through, then refuses with the status and Retry-After asked for, or the time to a token', () => {
    const c = clock();
    const l = new ProxyLimit({ requestsPerSecond: 0.5, burst: 2 }, c.now);
    expect([l.take(), l.take()]).toEqual([undefined, undefined]);
    expect(l.take()).toEqual({ status: 429, retryAfterS: 2 });
    c.advance(2000);
    expect(l.take()).toBeUndefined();
    const fixed = new ProxyLimit({ requestsPerSecond: 0, burst: 0, status: 503, retryAfterS: 7 }, c.now);
    expect(fixed.take()).toEqual({ status: 503, retryAfterS: 7 });
    expect(l.stats()).toEqual({ passed: 3, refused: 1 });
  });
});

describe('fault config', () => {
  it('throttle and proxy_limit in the scenario form, both ways', () => {
    const plain = {
      throttle: {
        max_wait_ms: 5000,
        infra_provider: { bytes_per_second: 20000, burst: 20000 },
        user: { bytes_per_second: 1, burst: 2 },
        internal: { bytes_per_second: 3, burst: 4 },
      },
      proxy_limit: { requests_per_second: 2.5, burst: 10, status: 503, retry_after_s: 3 },
    };
    const c = faultConfigFromPlain(plain, 'faults');
    expect(c).toEqual({
      throttle: {
        maxWaitMs: 5000,
        infraProvider: { bytesPerSecond: 20000, burst: 20000 },
        user: { bytesPerSecond: 1, burst: 2 },
        internal: { bytesPerSecond: 3, burst: 4 },
      },
      proxyLimit: { requestsPerSecond: 2.5, burst: 10, status: 503, retryAfterS: 3 },
    });
    expect(faultConfigToPlain(c)).toEqual(plain);
  });

  it.each([
    [
      { throttle: { infra_provider: { bytes_per_second: 0, burst: 1 } } },
      'faults.throttle.infra_provider.bytes_per_second: expected a positive integer',
    ],
    [
      { throttle: { infra_provider: { bytes_per_second: 5 } } },
      'faults.throttle.infra_provider: bytes_per_second and burst are required',
    ],
    [
      { throttle: { infraProvider: {} } },
      'faults.throttle.infraProvider: unknown key (known: max_wait_ms, user, infra_provider, internal)',
    ],
    [{ throttle: { max_wait_ms: -1 } }, 'faults.throttle.max_wait_ms: expected a non-negative integer'],
    [
      { proxy_limit: { requests_per_second: 1, burst: 1, status: 500 } },
      'faults.proxy_limit.status: expected 429 or 503',
    ],
    [{ proxy_limit: { burst: 1 } }, 'faults.proxy_limit: requests_per_second and burst are required'],
  ])('%j is refused: %s', (plain, message) => {
    expect(() => faultConfigFromPlain(plain, 'faults')).toThrow(new FaultConfigError(message));
  });

  it('Faults builds the throttles from the config, anew when set again, none after a reset', () => {
    const f = new Faults(
      undefined,
      { throttle: { infraProvider: { bytesPerSecond: 10, burst: 10 } } },
      async () => undefined,
      () => 0,
    );
    const first = f.throttle;
    expect(first).toBeInstanceOf(WriteThrottle);
    f.set({ latencyMs: 1 });
    expect(f.throttle).toBe(first);
    f.set({ throttle: { user: { bytesPerSecond: 1, burst: 1 } } });
    expect(f.throttle).not.toBe(first);
    f.set({ proxyLimit: { requestsPerSecond: 1, burst: 1 } });
    expect(f.proxyLimit).toBeInstanceOf(ProxyLimit);
    f.set({ throttle: undefined });
    expect(f.throttle).toBeUndefined();
    f.reset();
    expect([f.throttle, f.proxyLimit]).toEqual([undefined, undefined]);
  });
});
