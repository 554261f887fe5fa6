// The gateway's streams: a List answered as one NDJSON message per item, a Watch as its batches of
// events (a dropped watch cut after N events, faults.ts), and the set of streams open now, which a
// simulated restart cuts. Apart from server.ts, which routes each call and answers the unary ones:
// a stream outlives its routing, and what it may meet (an error line, a broken store) is its own.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { GrpcCode } from '../../omni-api/errors.js';
import type { Resource } from '../../omni-api/resource.js';
import { encodeMessage } from '../../omni-api/protojson.js';
import { Methods } from '../../omni-api/wire.js';
import type { Identity, SimEvent, StateApi, WatchParams } from '../api.js';
import type { GatewayBehaviour } from '../behaviour.js';
import { queryFromWire } from '../store/query.js';
import { StreamBrokenError } from '../store/events.js';
import { Body, encodingFor, GRPC_CONTENT_TYPE, line, sendStreamError, statusJson, statusOf } from './answer.js';
import type { Faults } from './faults.js';
import type { ResourceCodec } from './resources.js';

/** What the streams read from and answer with: the gateway's state, codec, version and faults. */
export interface StreamDeps {
  state: StateApi;
  resources: ResourceCodec;
  behaviour: GatewayBehaviour;
  faults?: Faults | undefined;
}

export class Streams {
  private readonly open = new Set<ServerResponse>();

  constructor(private readonly deps: StreamDeps) {}

  /** Cuts every open stream (a simulated restart). */
  breakAll(): void {
    for (const res of this.open) res.destroy();
    this.open.clear();
  }

  get size(): number {
    return this.open.size;
  }

  /** A List: the resources read at once, then one line per item. */
  async list(req: IncomingMessage, res: ServerResponse, who: Identity, msg: Record<string, unknown>): Promise<void> {
    const opts = (msg['options'] ?? {}) as Record<string, unknown>;
    let items: Resource[];
    try {
      items = this.deps.state.list(
        who,
        String(msg['namespace']),
        String(msg['type']),
        queryFromWire(opts['label_query'], opts['id_query']),
      );
    } catch (e) {
      sendStreamError(req, res, statusOf(e));
      return;
    }
    const body = this.start(req, res);
    // One message (and one flush) per item, as Omni sends a List: a client pays an inflate step per
    // item of a gzip List, and the benchmark should see that cost.
    await body.writeAll(items, (r) =>
      line({ result: encodeMessage(Methods.List.response, { resource: this.deps.resources.out(r) }) }),
    );
    this.open.delete(res);
    body.end();
  }

  /** A Watch: an empty first line, then one line per batch until the caller, the store or a fault ends it. */
  async watch(req: IncomingMessage, res: ServerResponse, who: Identity, msg: Record<string, unknown>): Promise<void> {
    if (msg['options'] === undefined && this.deps.behaviour.watchWithoutOptionsPanics) {
      sendStreamError(req, res, {
        code: GrpcCode.Internal,
        message: 'runtime error: invalid memory address or nil pointer dereference',
      });
      return;
    }
    const params = watchParams(msg);
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    let batches: AsyncIterable<SimEvent[]>;
    try {
      batches = this.deps.state.watch(who, params, ac.signal);
    } catch (e) {
      ac.abort();
      sendStreamError(req, res, statusOf(e));
      return;
    }
    const body = this.start(req, res);
    body.write(line({ result: {} }));
    const dropAfter = this.deps.faults?.dropWatchAfterEvents();
    let sent = 0;
    try {
      for await (const batch of batches) {
        if (res.destroyed) break;
        body.write(
          line({
            result: encodeMessage(Methods.Watch.response, { event: batch.map((e) => this.deps.resources.eventOut(e)) }),
          }),
        );
        sent += batch.length;
        if (dropAfter !== undefined && sent >= dropAfter) {
          await body.cut();
          return;
        }
      }
      body.end();
    } catch (e) {
      if (e instanceof StreamBrokenError) res.destroy();
      else {
        body.write(line({ error: statusJson(statusOf(e)) }));
        body.end();
      }
    } finally {
      ac.abort();
      this.open.delete(res);
    }
  }

  /** The stream's headers and body (gzip as the request asks), counted among the open ones until it closes. */
  private start(req: IncomingMessage, res: ServerResponse): Body {
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader(GRPC_CONTENT_TYPE[0], GRPC_CONTENT_TYPE[1]);
    this.open.add(res);
    res.on('close', () => this.open.delete(res));
    const body = new Body(res, encodingFor(req));
    res.flushHeaders();
    return body;
  }
}

/** A Watch request's fields and options as the StateApi takes them. */
function watchParams(msg: Record<string, unknown>): WatchParams {
  const o = (msg['options'] ?? {}) as Record<string, unknown>;
  return {
    namespace: String(msg['namespace']),
    type: String(msg['type']),
    ...(msg['id'] !== undefined ? { id: String(msg['id']) } : {}),
    bootstrapContents: o['bootstrap_contents'] === true,
    tailEvents: Number(o['tail_events'] ?? 0),
    query: queryFromWire(o['label_query'], o['id_query']),
    aggregated: o['aggregated'] === true,
    ...(o['start_from_bookmark'] !== undefined ? { startFromBookmark: o['start_from_bookmark'] as Uint8Array } : {}),
    bootstrapBookmark: o['bootstrap_bookmark'] === true,
    apiVersion: Number(msg['api_version'] ?? 0),
  };
}
