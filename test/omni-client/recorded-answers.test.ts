// Every answer a real Omni gave (the shared recordings of v1.3.4 and v1.9.3, see their README) still
// decodes under the strict rules for what a server answers: a 200 is the data it holds, an error is
// the typed OmniError with the recorded gRPC code, never a ProtocolError. Each exchange is replayed
// by a loopback server that answers it byte for byte (gzip again where Omni used it).

import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import { OmniError } from '../../src/omni-api/errors.js';
import type { Pointer } from '../../src/omni-api/resource.js';
import type { WatchEvent } from '../../src/omni-api/state.js';
import { ResourceSchema, resourceFromWire } from '../../src/omni-api/wire.js';
import { decodeMessage } from '../../src/omni-api/protojson.js';
import { generateKey } from '../../src/omni-sim/scenario/keys.js';
import { noDelay } from '../helpers/fake-gateway.js';
import { sharedPath } from '../helpers/shared-data.js';

interface Exchange {
  n: number;
  step: string;
  request: { rpc: string; body: Record<string, unknown> | null };
  response: { status: number; headers: Record<string, string>; lines: Record<string, unknown>[] };
}

const RECORDINGS = ['omni-v1.3.4.ndjson', 'omni-v1.9.3.ndjson'];
const STREAMS = new Set(['List', 'Watch']);

let current: Exchange | undefined;
let server: http.Server;
let client: OmniClient;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const x = current!;
      const r = x.response;
      const text =
        STREAMS.has(x.request.rpc) || r.lines.length !== 1 || 'error' in (r.lines[0] ?? {})
          ? r.lines.map((l) => `${JSON.stringify(l)}\n`).join('')
          : JSON.stringify(r.lines[0]);
      const gz = r.headers['content-encoding'] === 'gzip';
      res.writeHead(r.status, { ...r.headers });
      if (x.request.rpc === 'Watch' && r.status === 200) {
        // A watch stays open: the client stops reading when it has what it expects.
        res.write(gz ? gzipSync(text) : text);
        return;
      }
      res.end(gz ? gzipSync(text) : text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const key = await generateKey('infra-provider:rec', { lifetimeSeconds: 3600 });
  client = await createOmniClient({
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    key: key.serviceAccountKey,
    delay: noDelay,
    env: {},
    retries: 0,
  });
});
afterAll(async () => {
  await client.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function exchanges(file: string): Exchange[] {
  return readFileSync(sharedPath('omni-recordings', file), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Exchange);
}

function pointerOf(body: Record<string, unknown> | null): Pointer {
  const b = body ?? {};
  return {
    namespace: String(b['namespace'] ?? 'infra-provider'),
    type: String(b['type'] ?? 'InfraMachines.omni.sidero.dev'),
    id: String(b['id'] ?? 'x'),
  };
}

function resourceIn(body: Record<string, unknown> | null, field: 'resource' | 'new_resource') {
  return resourceFromWire(decodeMessage(ResourceSchema, (body ?? {})[field], { strict: false }), true);
}

const idOf = (l: Record<string, unknown>) =>
  (l['result'] as { resource: { metadata: { id: string } } }).resource.metadata.id;

async function watchEvents(ns: string, type: string, count: number): Promise<WatchEvent[]> {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), 5000);
  const out: WatchEvent[] = [];
  try {
    for await (const batch of client.state.watchKind(ns, type, { signal: ac.signal })) {
      out.push(...batch);
      if (out.length >= count) break;
    }
  } finally {
    clearTimeout(t);
    ac.abort();
  }
  return out;
}

for (const file of RECORDINGS) {
  describe(`what ${file} recorded decodes`, () => {
    for (const x of exchanges(file)) {
      it(`${x.n} ${x.step} (${x.request.rpc}, HTTP ${x.response.status})`, async () => {
        current = x;
        const r = x.response;
        const body = x.request.body;
        if (r.status !== 200) {
          const first = r.lines[0] as { code?: number; error?: { code: number } };
          const code = first.error?.code ?? first.code;
          const err = await client.state.get(pointerOf(body)).catch((e: unknown) => e);
          expect(err, JSON.stringify(r.lines[0])).toBeInstanceOf(OmniError);
          expect((err as OmniError).grpcCode).toBe(code);
          return;
        }
        switch (x.request.rpc) {
          case 'Get': {
            const p = pointerOf(body);
            expect((await client.state.get(p)).metadata).toMatchObject(p);
            return;
          }
          case 'List': {
            const p = pointerOf(body);
            const rs = await client.state.list(p.namespace, p.type);
            expect(rs.map((q) => q.metadata.id)).toEqual(r.lines.map(idOf));
            return;
          }
          case 'Watch': {
            const p = pointerOf(body);
            const recorded = r.lines.slice(1).flatMap((l) => (l['result'] as { event?: unknown[] }).event ?? []);
            const events = await watchEvents(p.namespace, p.type, recorded.length);
            expect(events).toHaveLength(recorded.length);
            return;
          }
          case 'Create': {
            const res = resourceIn(body, 'resource');
            const owner = String(((body ?? {})['options'] as { owner?: string } | undefined)?.owner ?? '');
            expect((await client.state.create(res, { owner })).metadata.version).toBe('1');
            return;
          }
          case 'Update': {
            const res = resourceIn(body, 'new_resource');
            expect((await client.state.update(res, { owner: res.metadata.owner })).metadata.id).toBe(res.metadata.id);
            return;
          }
          case 'Destroy':
            await client.state.destroy(pointerOf(body));
            return;
          default:
            throw new Error(`no replay for a 200 answer of ${x.request.rpc}`);
        }
      });
    }
  });
}
