// How the sim's gateway reads a request (docs/omni-wire.md 1.3): the body bounded by gRPC's receive
// limit as Omni raises it, decoded as grpc-gateway decodes it (Go's json.Decoder, then strict protojson
// with protobuf-go's error prefix), and the resource a write names (for faults that lose its answer).

import type { IncomingMessage } from 'node:http';
import type { Pointer } from '../../omni-api/resource.js';
import { decodeMessage } from '../../omni-api/protojson.js';
import { WireError } from '../../omni-api/wire.js';
import { type MessageSchema, type MethodName } from '../../omni-api/wire.js';
import { firstJsonValue, GoJsonError, keyPosition } from './request-json.js';

/** gRPC's default receive limit as Omni raises it (constants.GRPCMaxMessageSize). */
export const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

/** The body as text, or undefined when it is over MAX_REQUEST_BYTES or the request failed. */
export function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_REQUEST_BYTES) tooBig = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(tooBig ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(undefined));
  });
}

/**
 * The request message as Omni's gateway decodes it (request-json.ts); errors worded as Go's, protojson's
 * prefixed with `prefix` (behaviour.ts: protobuf-go's prefix for the version).
 */
export function decodeRequest(schema: MessageSchema, text: string, prefix: string): Record<string, unknown> {
  let body: string | undefined;
  try {
    body = firstJsonValue(text);
  } catch (e) {
    if (e instanceof GoJsonError) throw new WireError(e.message);
    throw e;
  }
  if (body === undefined) return decodeMessage(schema, {}, { strict: true });
  try {
    return decodeMessage(schema, JSON.parse(body), { strict: true });
  } catch (e) {
    const m = /^unknown field "(.*)" in [A-Za-z]+$/.exec((e as Error).message);
    const at = m ? keyPosition(body, m[1] ?? '') : undefined;
    if (m && at) throw new WireError(`${prefix}(${at}): unknown field ${JSON.stringify(m[1])}`);
    // Other refusals keep our decoder's words (protojson's would name the value's position too).
    throw new WireError(`${prefix}${(e as Error).message.replace(/ in [A-Za-z]+$/, '')}`);
  }
}

/** The resource a write request names (Create, Update: in its resource's metadata). */
export function writtenPointer(method: MethodName, msg: Record<string, unknown>): Pointer {
  const r = method === 'Create' ? msg['resource'] : method === 'Update' ? msg['new_resource'] : undefined;
  const md = r === undefined ? msg : (((r as Record<string, unknown>)['metadata'] ?? {}) as Record<string, unknown>);
  return { namespace: String(md['namespace'] ?? ''), type: String(md['type'] ?? ''), id: String(md['id'] ?? '') };
}
