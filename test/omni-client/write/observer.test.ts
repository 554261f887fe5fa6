// The State tells its write observer of every Create, Update and Destroy before it
// is sent (the Updates of teardown and removeFinalizers included) and of its outcome after: ok,
// failed when Omni refused it, unknown when it may have been applied.

import { describe, expect, it } from 'vitest';
import { GatewayState, type StateTransport } from '../../../src/omni-client/gateway-state.js';
import { wrapCore } from '../../../src/omni-client/wrap.js';
import type { CallContext } from '../../../src/omni-client/transport/call.js';
import type { MethodName } from '../../../src/omni-api/wire.js';
import {
  CanceledError,
  FailedPreconditionError,
  NotFoundError,
  UnavailableError,
} from '../../../src/omni-api/errors.js';
import { TransportError } from '../../../src/omni-client/errors.js';
import { NS_INFRA_PROVIDER, T, newMetadata } from '../../../src/omni-api/resource.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import type { WriteIntent, WriteOutcome } from '../../../src/omni-client/write/observer.js';

const U1 = '11111111-1111-1111-1111-111111111111';
const P = { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: U1 };
const stored = {
  metadata: {
    ...P,
    version: '5',
    phase: 'tearingDown',
    owner: 'InfraMachineController',
    finalizers: ['bm.A', 'bm.B', 'Other'],
  },
  spec: { proto_spec: 'CAE=' },
};
const read: Resource = {
  metadata: newMetadata(P, {
    version: '5',
    phase: 'tearingDown',
    owner: 'InfraMachineController',
    finalizers: ['bm.A', 'bm.B', 'Other'],
  }),
  spec: { protoSpec: new Uint8Array([8, 1]) },
};

type Step = (method: MethodName, body: Record<string, unknown>, ctx: CallContext) => unknown;

/** A transport double: Get answers `stored`; writes answer what was sent with the next version, or run `write`. */
function harness(write?: Step) {
  const log: string[] = [];
  const intents: WriteIntent[] = [];
  const outcomes: WriteOutcome[] = [];
  const transport: StateTransport = {
    unary: async <R>(
      method: MethodName,
      body: unknown,
      ctx: CallContext = {},
      decode: (answer: unknown) => R = (a) => a as R,
    ): Promise<R> => {
      log.push(`send ${method}`);
      if (method === 'Get') return decode({ resource: stored });
      if (write) return decode(await write(method, body as Record<string, unknown>, ctx));
      const sent = body as {
        new_resource?: { metadata: Record<string, unknown> };
        resource?: { metadata: Record<string, unknown> };
      };
      const r = sent.new_resource ?? sent.resource;
      return decode(r ? { resource: { ...r, metadata: { ...r.metadata, version: '6' } } } : {});
    },
    collect: () => Promise.reject(new Error('not used')),
    openStream: () => Promise.reject(new Error('not used')),
  };
  const state = wrapCore(
    new GatewayState(transport, {
      delay: async () => undefined,
      onWrite: (w) => {
        log.push(`intent ${w.method}`);
        intents.push(w);
        return (o) => {
          log.push(`outcome ${o.result}`);
          outcomes.push(o);
        };
      },
    }),
    { delay: async () => undefined },
  );
  return { state, log, intents, outcomes };
}

describe('the write observer of GatewayState', () => {
  it('hears of each write before it is sent and its outcome after, with the resource before and intended', async () => {
    const h = harness();
    const r = await h.state.removeFinalizers(read, ['bm.A', 'bm.B']);
    expect(r.outcome).toBe('removed');
    expect(h.log).toEqual(['intent Update', 'send Update', 'outcome ok']);
    expect(h.intents[0]).toMatchObject({
      method: 'Update',
      resource: P,
      owner: 'InfraMachineController',
      before: read,
    });
    expect(h.intents[0]!.sent?.metadata.finalizers).toEqual(['Other']);
    expect(h.outcomes[0]).toMatchObject({ result: 'ok', after: { metadata: { version: '6', finalizers: ['Other'] } } });

    const t = harness();
    stored.metadata.phase = 'running';
    try {
      await t.state.teardown(P);
    } finally {
      stored.metadata.phase = 'tearingDown';
    }
    expect(t.log).toEqual(['send Get', 'intent Update', 'send Update', 'outcome ok']);
    expect(t.intents[0]).toMatchObject({
      method: 'Update',
      expectedPhase: 'running',
      before: { metadata: { phase: 'running' } },
      sent: { metadata: { phase: 'tearingDown' } },
    });

    const d = harness();
    await d.state.destroy(P, { owner: 'x', before: read });
    await d.state.create(
      { metadata: newMetadata({ ...P, id: 'new' }), spec: { protoSpec: new Uint8Array() } },
      { owner: 'bm.ProvisionController' },
    );
    expect(d.log).toEqual([
      'intent Destroy',
      'send Destroy',
      'outcome ok',
      'intent Create',
      'send Create',
      'outcome ok',
    ]);
    expect(d.intents.map((i) => [i.method, i.owner, i.before?.metadata.version])).toEqual([
      ['Destroy', 'x', '5'],
      ['Create', 'bm.ProvisionController', undefined],
    ]);
  });

  it('failed only if Omni refused; unknown if cancelled, cut off, or refused after retry (maybe applied)', async () => {
    const cases: [Step, string][] = [
      [
        () => {
          throw new FailedPreconditionError('version conflict', { httpStatus: 400 });
        },
        'failed',
      ],
      [
        () => {
          throw new NotFoundError('gone', { httpStatus: 404 });
        },
        'failed',
      ],
      [
        () => {
          throw new CanceledError('cancelled by the caller');
        },
        'unknown',
      ],
      [
        () => {
          throw new TransportError('socket hang up');
        },
        'unknown',
      ],
      [
        () => {
          throw new UnavailableError('proxy: upstream reset', { httpStatus: 503 });
        },
        'unknown',
      ],
      [
        (_m, _b, ctx) => {
          ctx.onRetry?.();
          throw new FailedPreconditionError('version conflict', { httpStatus: 400 });
        },
        'unknown',
      ],
    ];
    for (const [step, expected] of cases) {
      const h = harness(step);
      await expect(h.state.destroy(P)).rejects.toThrow();
      await expect(h.state.update(read)).rejects.toThrow();
      expect(
        h.outcomes.map((o) => o.result),
        String(step),
      ).toEqual([expected, expected]);
    }
  });

  it('an observer that cannot record the intent stops the write before it is sent', async () => {
    const sent: string[] = [];
    const state = new GatewayState(
      {
        unary: async <R>(
          method: MethodName,
          _body: unknown,
          _ctx?: CallContext,
          decode: (answer: unknown) => R = (a) => a as R,
        ): Promise<R> => {
          sent.push(method);
          return decode({});
        },
        collect: () => Promise.reject(new Error('not used')),
        openStream: () => Promise.reject(new Error('not used')),
      },
      {
        onWrite: () => {
          throw new Error('ENOSPC: the audit log is full');
        },
      },
    );
    await expect(state.destroy(P)).rejects.toThrow(/ENOSPC/);
    expect(sent).toEqual([]);
  });
});

describe('a write whose caller already gave up', () => {
  it('is neither sent nor heard of (no intent that never left)', async () => {
    const h = harness();
    const ac = new AbortController();
    ac.abort(new Error('SIGTERM'));
    await expect(h.state.destroy(P, { signal: ac.signal })).rejects.toMatchObject({ code: 'OMNI_CANCELED' });
    await expect(h.state.update(read, { signal: ac.signal })).rejects.toMatchObject({ code: 'OMNI_CANCELED' });
    expect(h.log).toEqual([]);
  });
});
