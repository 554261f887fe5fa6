// A stream's deadline is an idle deadline (src/omni-client/transport/deadline.ts): a List that keeps
// delivering is never cut, however long it takes; one that stops delivering fails with
// STUB_STREAM_STALLED; one slower on average than the pace limit too. The durations are scaled down
// (an idle deadline of a second or two instead of 30 s); nothing here measures time, the server only
// paces its lines.

import type http from 'node:http';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient, type OmniClientOptions } from '../../../src/omni-client/client.js';
import { StreamStalledError } from '../../../src/omni-client/errors.js';
import { generateKey, type GeneratedKey } from '../../../src/omni-sim/scenario/keys.js';
import { LineWriter, noDelay, res, startFakeGateway, wireResource } from '../../helpers/fake-gateway.js';
import type { FakeGateway } from '../../helpers/fake-gateway.js';

let key: GeneratedKey;
let gw: FakeGateway;
const clients: OmniClient[] = [];
const timers = new Set<NodeJS.Timeout>();
const NS = 'infra-provider';
const TYPE = 'InfraMachines.omni.sidero.dev';

beforeAll(async () => {
  key = await generateKey('infra-provider:bare-metal', { lifetimeSeconds: 3600 });
});
beforeEach(async () => {
  gw = await startFakeGateway();
});
afterEach(async () => {
  for (const t of timers) clearInterval(t);
  timers.clear();
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await gw.close();
});

async function mk(extra: Partial<OmniClientOptions>): Promise<OmniClient> {
  const c = await createOmniClient({ endpoint: gw.url, key: key.serviceAccountKey, delay: noDelay, env: {}, ...extra });
  clients.push(c);
  return c;
}

/** A List answer that sends `lines` items, one every `everyMs`, then stops for good after `stopAfter` (or ends). */
function pacedList(
  s: http.ServerResponse,
  o: { lines: number; everyMs: number; stopAfter?: number },
  gzip = false,
): void {
  const w = new LineWriter(s, { gzip });
  let sent = 0;
  const t = setInterval(() => {
    if (o.stopAfter !== undefined && sent >= o.stopAfter) return;
    if (sent >= o.lines) {
      clearInterval(t);
      w.end();
      return;
    }
    void w.result({ resource: wireResource(res(`m${sent++}`)) });
  }, o.everyMs);
  timers.add(t);
}

describe('a List under an idle deadline', () => {
  it.each([false, true])(
    'that keeps delivering completes, though it takes several times the idle deadline (gzip %s)',
    async (gzip) => {
      gw.on('List', (_q, s) => pacedList(s, { lines: 20, everyMs: 150 }, gzip));
      const c = await mk({ streamIdleMs: 1_000, timeoutMs: 1_000, streamMinBytesPerSecond: 10 });
      const started = performance.now();
      const items = await c.state.list(NS, TYPE);
      expect(items.map((r) => r.metadata.id)).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
      // Longer than the idle deadline (and the unary deadline): the old whole-call deadline would have cut it.
      expect(performance.now() - started).toBeGreaterThan(1_000);
    },
  );

  it('that stops delivering fails with STUB_STREAM_STALLED, naming the call and what it had read', async () => {
    gw.on('List', (_q, s) => pacedList(s, { lines: 20, everyMs: 100, stopAfter: 2 }));
    const c = await mk({ streamIdleMs: 1_000 });
    const err = await c.state.list(NS, TYPE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamStalledError);
    expect((err as StreamStalledError).code).toBe('STUB_STREAM_STALLED');
    expect((err as Error).message).toMatch(
      new RegExp(
        '^/cosi\\.resource\\.State/List infra-provider/InfraMachines\\.omni\\.sidero\\.dev/: ' +
          'nothing received for 1000 ms, after \\d+ bytes in \\d+ ms \\(stream idle deadline\\)$',
      ),
    );
  });

  it('that never sends its headers fails the same way', async () => {
    gw.on('List', () => undefined);
    const c = await mk({ streamIdleMs: 500 });
    await expect(c.state.list(NS, TYPE)).rejects.toBeInstanceOf(StreamStalledError);
  });

  it('that trickles, slower on average than the pace limit, fails with STUB_STREAM_STALLED too', async () => {
    gw.on('List', (_q, s) => pacedList(s, { lines: 100, everyMs: 200 }));
    // Any gap of 200 ms is within the idle deadline; 2 s plus a few microseconds per byte is not.
    const c = await mk({ streamIdleMs: 2_000, streamMinBytesPerSecond: 1e9 });
    const err = await c.state.list(NS, TYPE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamStalledError);
    expect((err as Error).message).toMatch(/slower than 1000000000 bytes\/s on average, after \d+ bytes .*pace limit/);
  });

  it('that delivered while this process was too busy to read is not taken for a stalled one', async () => {
    // The fake gateway runs in this process: blocking its handler blocks the client too, as a long
    // synchronous step of the stub would. The idle timer expires during the block while the rest of
    // the List already waits in the socket; the timer runs first when the loop resumes.
    gw.on('List', (_q, s) => {
      const w = new LineWriter(s);
      void w.result({ resource: wireResource(res('m0')) });
      const t = setTimeout(() => {
        for (let i = 1; i < 5; i++) void w.result({ resource: wireResource(res(`m${i}`)) });
        w.end();
        const until = performance.now() + 900;
        while (performance.now() < until) {
          // busy: the event loop is blocked for three idle deadlines
        }
      }, 100);
      timers.add(t);
    });
    const c = await mk({ streamIdleMs: 300 });
    const items = await c.state.list(NS, TYPE);
    expect(items.map((r) => r.metadata.id)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('a caller-given timeoutMs is the idle deadline of that List', async () => {
    gw.on('List', (_q, s) => pacedList(s, { lines: 20, everyMs: 100, stopAfter: 1 }));
    const c = await mk({ streamIdleMs: 60_000 });
    await expect(c.state.list(NS, TYPE, { timeoutMs: 500 })).rejects.toBeInstanceOf(StreamStalledError);
  });
});

describe("a Watch's opening under the idle deadline", () => {
  it('a first message that does not come fails the opening (and a kind watch tries again)', async () => {
    let opened = 0;
    gw.on('Watch', (_q, s) => {
      opened++;
      if (opened === 1) return; // headers and first message never come
      const w = new LineWriter(s);
      void w.result({});
    });
    const c = await mk({ streamIdleMs: 500 });
    const ac = new AbortController();
    const it = c.state.watchKind(NS, TYPE, { signal: ac.signal, bootstrapContents: false })[Symbol.asyncIterator]();
    const next = it.next();
    // The second opening succeeds; nothing more comes, so stop waiting once it is open.
    await expect.poll(() => opened, { timeout: 10_000 }).toBe(2);
    ac.abort();
    await next;
  });
});
