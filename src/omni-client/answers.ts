// What an answer of the gateway must be (docs/design.md rule 11): the resource of a Get, Create or Update answer
// or of a List line, and the events of a Watch message, decoded and checked against what was asked for; anything
// else is a WireError, never data. Apart from gateway-state.ts, which sends the calls, because every call's
// answer and every watch event passes these same checks.

import type { Pointer, Resource } from '../omni-api/resource.js';
import { VERSION_UNDEFINED, describePointer } from '../omni-api/resource.js';
import type { WatchEvent, WatchEventType } from '../omni-api/state.js';
import {
  DestroyResponseSchema,
  ResourceSchema,
  WatchResponseSchema,
  WatchResponseWithoutOldSchema,
  resourceFromWire,
} from '../omni-api/wire.js';
import { WireError } from '../omni-api/wire.js';
import { decodeMessage } from '../omni-api/protojson.js';

const DECODE = { strict: false } as const;
const EVENT_TYPES: WatchEventType[] = ['created', 'updated', 'destroyed', 'bootstrapped', 'errored', 'noop'];

/** What an answer must be about: the kind listed or watched, or (with `id`) the very resource asked for. */
interface Expected {
  namespace: string;
  type: string;
  id?: string;
}

/** The decoder of a Get, Create or Update answer: the resource asked for, nothing else. */
export function answerAbout(p: Pointer): (answer: unknown) => Resource {
  return (answer) => resourceOf(answer, p, 'an answer');
}

/** A Destroy answer (DestroyResponse): an object, whatever it holds. */
export function emptyAnswer(answer: unknown): void {
  decodeMessage(DestroyResponseSchema, answer, DECODE);
}

/**
 * The `resource` of a Get/Create/Update answer or a List line, validated (docs/design.md rule 11): present,
 * the strict metadata rules of wire.ts, a stored version (a number), a non-empty ID, of the namespace
 * and type asked for, and the ID asked for. Unknown fields (a newer Omni) are ignored.
 */
export function resourceOf(msg: unknown, expected: Expected, what: string): Resource {
  // GetResponse, ListResponse, CreateResponse and UpdateResponse are all `{resource}`: read that
  // field directly (a decodeMessage of the wrapper per List item is most of the cost of these checks).
  if (typeof msg !== 'object' || msg === null || Array.isArray(msg))
    throw new WireError(`${what} that is not a JSON object`);
  const w = (msg as Record<string, unknown>)['resource'];
  if (w === undefined || w === null) throw new WireError(`${what} without a resource`);
  return checked(decodeMessage(ResourceSchema, w, DECODE, 'resource'), expected, what, 'stored');
}

/** 'stored': version a number. 'last': also `undefined` (a DESTROYED tombstone). 'tombstone': ID "" too. */
type Kept = 'stored' | 'last' | 'tombstone';

function checked(decoded: unknown, expected: Expected, what: string, kept: Kept): Resource {
  const r = resourceFromWire(decoded, true);
  const md = r.metadata;
  if (kept === 'stored' && md.version === VERSION_UNDEFINED)
    throw new WireError(`${what} with version "undefined" (not a stored resource): ${describePointer(md)}`);
  if (kept !== 'tombstone' && md.id === '') throw new WireError(`${what} with an empty ID`);
  if (
    md.namespace !== expected.namespace ||
    md.type !== expected.type ||
    (expected.id !== undefined && md.id !== expected.id)
  ) {
    const asked =
      expected.id !== undefined ? describePointer(expected as Pointer) : `${expected.namespace}/${expected.type}`;
    throw new WireError(`${what} about ${describePointer(md)}, not ${asked} that was asked for`);
  }
  return r;
}

/** How much of a resource each event type must carry (docs/design.md, "What an answer must be"). */
const EVENT_RESOURCE: Record<WatchEventType, Kept | undefined> = {
  created: 'stored',
  updated: 'stored',
  // The last state; a single-resource watch sends a tombstone instead.
  destroyed: 'last',
  bootstrapped: 'tombstone',
  noop: 'tombstone',
  // The watch cannot go on: nothing is read from it but its error.
  errored: undefined,
};

/**
 * One Watch message: an empty one (the first, or an empty batch) is no events; every event but an
 * ERRORED one must carry a resource of the kind watched (CREATED, UPDATED, DESTROYED: with an ID),
 * since a DESTROYED event is evidence that the resource is gone. An UPDATED event's previous state
 * (`old`) is checked the same way, or with `previous` false left unread (WatchKindOptions.previous).
 */
export function decodeEvents(msg: unknown, kind: Expected, previous = true): WatchEvent[] {
  const resp = decodeMessage(previous ? WatchResponseSchema : WatchResponseWithoutOldSchema, msg, DECODE);
  return (resp['event'] as Record<string, unknown>[]).map((e) => {
    const type = EVENT_TYPES[e['event_type'] as number] ?? 'noop';
    const kept = EVENT_RESOURCE[type];
    let resource: Resource;
    if (kept === undefined) {
      resource = resourceFromWire(e['resource'] ?? { metadata: { namespace: kind.namespace, type: kind.type } });
    } else {
      if (e['resource'] === undefined) throw new WireError(`a Watch event (${type}) without a resource`);
      resource = checked(e['resource'], kind, `a Watch event (${type})`, kept);
    }
    const out: WatchEvent = { type, resource };
    if (e['old'] !== undefined)
      out.old = checked(
        e['old'],
        { ...kind, id: resource.metadata.id },
        `the old resource of a Watch event (${type})`,
        'last',
      );
    if (typeof e['error'] === 'string') out.error = e['error'];
    if (e['bookmark'] instanceof Uint8Array) out.bookmark = e['bookmark'];
    return out;
  });
}
