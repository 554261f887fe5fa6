// The client reads all of what a real Omni answered: every recorded answer of every
// recording in the shared folder's omni-recordings/ is served, exactly as recorded (status, headers,
// lines; gzip where Omni compressed), by a loopback server, and decoded by src/omni-client through the
// call that reads it (Get, List, Create, Update, Destroy, watchKind). A resource decodes to what Omni
// sent (re-encoded it gives the recorded JSON back), a watch line to its events, and an error to the
// typed error of its gRPC code with Omni's message, the exit code docs/operator-guide.md documents
// for it, and the retry decision: none of the recorded errors is retried by the transport, and a Job
// retries exactly the exit codes the guide says it retries.

import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import { errorFromStatus, OmniError } from '../../src/omni-api/errors.js';
import type { Resource } from '../../src/omni-api/resource.js';
import type { WatchEvent } from '../../src/omni-api/state.js';
import { decodeMessage, encodeMessage } from '../../src/omni-api/protojson.js';
import { ResourceSchema, resourceFromWire, resourceToWire } from '../../src/omni-api/wire.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { canonical, loadRecordings, statusOfLines, type RecordedExchange } from '../helpers/omni-recordings.js';

const recordings = loadRecordings();
let key: GeneratedKey;
let server: Server;
let endpoint: string;
let client: OmniClient;
/** The exchange the loopback server answers with, and how many requests it got. */
let current: RecordedExchange | undefined;
let hits = 0;

beforeAll(async () => {
  key = await generateKey('infra-provider:rec', { lifetimeSeconds: 3600 });
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      hits++;
      serve(current, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  client = await createOmniClient({ endpoint, key: key.serviceAccountKey, env: {}, timeoutMs: 5_000 });
});
afterAll(async () => {
  await client?.close();
  server?.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** The recorded answer, byte for byte as Omni framed it: a unary JSON body, or NDJSON lines left open like a watch. */
function serve(ex: RecordedExchange | undefined, res: ServerResponse): void {
  if (!ex) {
    res.statusCode = 500;
    res.end();
    return;
  }
  const r = ex.response;
  res.statusCode = r.status;
  for (const [k, v] of Object.entries(r.headers)) res.setHeader(k, v);
  const stream = ex.request.rpc === 'List' || ex.request.rpc === 'Watch';
  const text = stream ? r.lines.map((l) => `${JSON.stringify(l)}\n`).join('') : JSON.stringify(r.lines[0]);
  const body = r.headers['content-encoding'] === 'gzip' ? gzipSync(text) : Buffer.from(text);
  // A watch that answered 200 stays open, as Omni's does, until the client lets go of it.
  if (ex.request.rpc === 'Watch' && r.status === 200) res.write(body);
  else res.end(body);
}

/** What Omni meant by a resource: its JSON, which the decoded model must encode back to. */
const asOmniJson = (r: Resource) => canonical(encodeMessage(ResourceSchema, resourceToWire(r)));

function requestResource(ex: RecordedExchange): Resource {
  const body = (ex.request.body ?? {}) as Record<string, unknown>;
  return resourceFromWire(
    decodeMessage(ResourceSchema, body['resource'] ?? body['new_resource'] ?? {}, { strict: false }),
  );
}

function pointer(ex: RecordedExchange): { namespace: string; type: string; id: string } {
  const b = (ex.request.body ?? {}) as Record<string, string>;
  return { namespace: b['namespace'] ?? 'infra-provider', type: b['type'] ?? 'Nope', id: b['id'] ?? 'x' };
}

/** The events the recorded watch lines mean, as the client's watchKind yields them (empty batches dropped). */
function recordedBatches(ex: RecordedExchange): unknown[] {
  const types = ['created', 'updated', 'destroyed', 'bootstrapped', 'errored', 'noop'];
  return ex.response.lines
    .slice(1)
    .map((l) => {
      const events = (l as { result?: { event?: Record<string, unknown>[] } }).result?.event ?? [];
      return events.map((e) => ({
        type: types[(e['event_type'] as number | undefined) ?? 0],
        resource: canonical(e['resource'] ?? {}),
        ...(e['old'] ? { old: canonical(e['old']) } : {}),
        ...(typeof e['bookmark'] === 'string' ? { bookmark: e['bookmark'] } : {}),
      }));
    })
    .filter((b) => b.length > 0);
}

function decodedBatches(batches: WatchEvent[][]): unknown[] {
  return batches.map((b) =>
    b.map((e) => ({
      type: e.type,
      resource: asOmniJson(e.resource),
      ...(e.old ? { old: asOmniJson(e.old) } : {}),
      ...(e.bookmark ? { bookmark: Buffer.from(e.bookmark).toString('base64') } : {}),
    })),
  );
}

async function watch(ex: RecordedExchange): Promise<WatchEvent[][]> {
  const want = recordedBatches(ex).length;
  const ac = new AbortController();
  const out: WatchEvent[][] = [];
  const p = pointer(ex);
  const timer = setTimeout(() => ac.abort(), 5_000);
  try {
    for await (const b of client.state.watchKind(p.namespace, p.type, { signal: ac.signal })) {
      out.push(b);
      if (out.length >= want) ac.abort();
    }
  } finally {
    clearTimeout(timer);
  }
  return out;
}

/**
 * The call of ours that reads this answer; RPCs we never call (Teardown, made-up ones) are read as the unary call they
 * are.
 */
async function call(ex: RecordedExchange): Promise<unknown> {
  const opts = ((ex.request.body ?? {}) as { options?: { owner?: string; expected_phase?: string } }).options ?? {};
  switch (ex.request.rpc) {
    case 'List':
      return client.state.list(pointer(ex).namespace, pointer(ex).type);
    case 'Watch':
      return watch(ex);
    case 'Create':
      return client.state.create(requestResource(ex), { owner: opts.owner ?? '' });
    case 'Update':
      return client.state.update(requestResource(ex), {
        owner: opts.owner ?? '',
        ...(opts.expected_phase === 'running' || opts.expected_phase === 'tearingDown'
          ? { expectedPhase: opts.expected_phase }
          : {}),
      });
    case 'Destroy':
      return client.state.destroy(pointer(ex), { owner: opts.owner ?? '' });
    default:
      return client.state.get(pointer(ex));
  }
}

// ---------------------------------------------------------------------------------------------
// The documented exit codes (docs/operator-guide.md, "Exit codes and errors")

const guide = readFileSync(new URL('../../docs/operator-guide.md', import.meta.url), 'utf8');

/** `| \`OMNI_X\` | N |` rows, and the exit code of "other `OMNI_*`". */
function documentedExit(code: string): number {
  for (const m of guide.matchAll(/^\| ((?:`OMNI_[A-Z_]+`(?:, )?)+) \| (\d+) \|/gm)) {
    if ((m[1] ?? '').split(', ').includes(`\`${code}\``)) return Number(m[2]);
  }
  const other = /^\| other `OMNI_\*` \| (\d+) \|/m.exec(guide);
  if (!other) throw new Error('docs/operator-guide.md has no row for other OMNI_* errors');
  return Number(other[1]);
}

/** The guide's "A Job" column by exit code: does a Job retry it? */
function jobRetries(exit: number): boolean {
  const row = new RegExp(`^\\| ${exit} \\|.*\\| (retries|fails) \\|$`, 'm').exec(guide);
  if (!row) throw new Error(`docs/operator-guide.md has no exit code row for ${exit}`);
  return row[1] === 'retries';
}

describe.each(recordings.map((r) => [r.file, r] as const))('the client reads every answer of %s', (_file, rec) => {
  it.each(rec.exchanges.map((ex) => [ex.n, ex.step, ex] as const))('#%i %s', async (_n, _step, ex) => {
    current = ex;
    hits = 0;
    const want = statusOfLines(ex.response.lines);
    let got: unknown;
    let err: unknown;
    try {
      got = await call(ex);
    } catch (e) {
      err = e;
    }
    if (want.code === 0) {
      expect(err).toBeUndefined();
      switch (ex.request.rpc) {
        case 'List':
          expect((got as Resource[]).map(asOmniJson)).toEqual(
            ex.response.lines.map((l) => canonical((l as { result: { resource: unknown } }).result.resource)),
          );
          break;
        case 'Watch':
          expect(decodedBatches(got as WatchEvent[][])).toEqual(recordedBatches(ex));
          break;
        case 'Destroy':
          expect(got).toBeUndefined();
          break;
        default:
          expect(asOmniJson(got as Resource)).toBe(canonical((ex.response.lines[0] as { resource: unknown }).resource));
      }
      return;
    }
    // An error: the typed error of the recorded code, Omni's message, the HTTP status.
    expect(err).toBeInstanceOf(OmniError);
    const e = err as OmniError;
    expect(e).toBeInstanceOf(errorFromStatus(want.code, '').constructor);
    expect({ grpcCode: e.grpcCode, httpStatus: e.httpStatus }).toEqual({
      grpcCode: want.code,
      httpStatus: ex.response.status,
    });
    // A refused signature gets the client's explanation appended; Omni's words come first.
    if (want.code === 16)
      expect(e.omniMessage.startsWith(`${want.message}: Omni refused identity "infra-provider:rec"`)).toBe(true);
    else expect(e.omniMessage).toBe(want.message);
    // Not retried by the transport (none of these is Unavailable or a broken connection).
    expect(hits).toBe(1);
    const exit = exitCodeFor(e);
    expect(exit).toBe(documentedExit(e.code));
    // A Job retries what may pass on a second run (1, 5) and fails what cannot (2, 3, 4).
    expect(jobRetries(exit)).toBe(exit === 1 || exit === 5);
  });
});
