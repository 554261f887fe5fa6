// What a failed write is (back-pressure, a lost answer, or final), and what a read-back by its ID
// shows of a write whose outcome is unknown: applied, not applied, or changed by someone else
// (pressure.ts; docs/design.md rule 14).

import { ApiError } from '../../omni-api/errors.js';
import { hasCode } from '../errors.js';
import type { Resource } from '../../omni-api/resource.js';
import { versionNumber } from '../../omni-api/resource.js';

/**
 * `pressure`: a back-pressure answer (DeadlineExceeded, ResourceExhausted, Unavailable, an HTTP 429,
 * 502, 503 or 504 of a proxy) or the client's own deadline: write more slowly, and read it back.
 * `lost`: the exchange broke after the write may have been sent: read it back. `final`: anything
 * else (a refusal, a malformed answer, a cancellation): the caller's, as today.
 */
export type WriteFailure = 'pressure' | 'lost' | 'final';

const PRESSURE_CODES = new Set(['OMNI_DEADLINE_EXCEEDED', 'OMNI_RESOURCE_EXHAUSTED', 'OMNI_UNAVAILABLE']);

export function classifyWriteFailure(e: unknown, signal?: AbortSignal): WriteFailure {
  if (!(e instanceof ApiError) || signal?.aborted) return 'final';
  if (PRESSURE_CODES.has(e.code)) return 'pressure';
  if (hasCode(e, 'STUB_TRANSPORT')) {
    if (e.httpStatus !== undefined) return 'pressure';
    return e.retriable ? 'lost' : 'final';
  }
  return 'final';
}

/**
 * What a Get after a write of unknown outcome shows. `applied`: it took effect (do not send it again);
 * `not-applied`: the resource is as before (send it again); `changed`: someone else wrote it meanwhile
 * (neither: the caller's conflict path reads it again and re-plans).
 */
export type Verdict = 'applied' | 'not-applied' | 'changed';

/** Same labels, annotations, owner and spec bytes: what a write of `sent` leaves, but for version and timestamps. */
function sameContent(a: Resource, b: Resource): boolean {
  const ma = a.metadata;
  const mb = b.metadata;
  return (
    ma.owner === mb.owner &&
    sameRecord(ma.labels, mb.labels) &&
    sameRecord(ma.annotations, mb.annotations) &&
    sameBytes(a.spec.protoSpec, b.spec.protoSpec)
  );
}

/**
 * A version-guarded Update of `sent` (carrying the version it read, v): applied when the resource is
 * at v+1 with our content (phase and finalizers included); not applied when it is still at v;
 * anything else was written by someone else.
 */
export function updateVerdict(sent: Resource, current: Resource): Verdict {
  const v = versionNumber(sent.metadata.version);
  const cv = versionNumber(current.metadata.version);
  if (cv === v) return 'not-applied';
  const s = sent.metadata;
  const c = current.metadata;
  if (cv === v + 1n && c.phase === s.phase && sameList(c.finalizers, s.finalizers) && sameContent(sent, current))
    return 'applied';
  return 'changed';
}

/**
 * A Destroy of what the caller read (`before`, when it said): a Get answering NotFound shows it
 * applied (positive evidence: a Get by that ID, never an absence from a List); found at the version
 * read (or with nothing read to compare), not applied; at another version, changed meanwhile.
 */
export function destroyVerdict(before: Resource | undefined, current: Resource | undefined): Verdict {
  if (current === undefined) return 'applied';
  if (before === undefined || before.metadata.version === current.metadata.version) return 'not-applied';
  return 'changed';
}

/**
 * A Create of `sent` as `owner`: NotFound, not applied; found with our owner, labels, annotations and
 * spec bytes, applied (finalizers are not compared: Omni's controllers may have added theirs since);
 * found otherwise, someone else's.
 */
export function createVerdict(sent: Resource, owner: string, current: Resource | undefined): Verdict {
  if (current === undefined) return 'not-applied';
  return current.metadata.owner === owner && sameContent({ ...sent, metadata: { ...sent.metadata, owner } }, current)
    ? 'applied'
    : 'changed';
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function sameRecord(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
