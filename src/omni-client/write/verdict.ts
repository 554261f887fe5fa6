// What a failed write is (back-pressure, a lost answer, too large, or final), and what a read-back by
// its ID shows of a write whose outcome is unknown: applied, not applied, or changed by someone else
// (pressure.ts; docs/design.md rule 14); the read-backs of a Create, an Update and a Destroy.

import { AlreadyExistsError, ApiError, FailedPreconditionError } from '../../omni-api/errors.js';
import { hasCode } from '../errors.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { LABEL_INFRA_PROVIDER_ID, describePointer, pointerOf, versionNumber } from '../../omni-api/resource.js';
import type { CallOptions, CoreState, OwnerOptions } from '../../omni-api/state.js';
import { getIfExists } from '../read.js';

/**
 * `pressure`: a back-pressure answer (DeadlineExceeded, Unavailable, an HTTP 429, 502, 503 or 504 of
 * a proxy) or the client's own deadline: write more slowly, and read it back. `lost`: the exchange
 * broke after the write may have been sent: read it back. `permanent`: Omni's ResourceExhausted, a
 * write larger than its write budget's burst (docs/omni-behaviour.md, "The etcd write budget"):
 * refused before its transaction, and no wait or retry can let it through. `final`: anything else (a
 * refusal, a malformed answer, a cancellation): the caller's, as today.
 */
export type WriteFailure = 'pressure' | 'lost' | 'permanent' | 'final';

const PRESSURE_CODES = new Set(['OMNI_DEADLINE_EXCEEDED', 'OMNI_UNAVAILABLE']);

export function classifyWriteFailure(e: unknown, signal?: AbortSignal): WriteFailure {
  if (!(e instanceof ApiError) || signal?.aborted) return 'final';
  if (e.code === 'OMNI_RESOURCE_EXHAUSTED') return 'permanent';
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

/**
 * Labels Omni sets itself on what a provider writes, whatever was sent (docs/omni-wire.md 4.5, "Server-added"): the
 * provider label on every Create and Update in the shared infra-provider namespaces. A read-back compares what the
 * write set, so these are left out on both sides.
 */
export const SERVER_ADDED_LABELS: readonly string[] = [LABEL_INFRA_PROVIDER_ID];

/**
 * What a write of `sent` leaves, compared with what a Get found: the same owner, labels (but the server-added),
 * annotations and spec bytes; version and timestamps aside.
 */
function sameContent(sent: Resource, found: Resource): boolean {
  const ms = sent.metadata;
  const mf = found.metadata;
  return (
    ms.owner === mf.owner &&
    sameRecord(ms.labels, mf.labels, SERVER_ADDED_LABELS) &&
    sameRecord(ms.annotations, mf.annotations) &&
    sameBytes(sent.spec.protoSpec, found.spec.protoSpec)
  );
}

/**
 * A version-guarded Update of `sent` (carrying the version it read, v): applied when the resource is
 * at v+1 with what we set (phase and finalizers included; Omni's own labels left out); not applied
 * when it is still at v; anything else was written by someone else.
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
 * A Create of `sent` as `owner`: NotFound, not applied; found with our owner, labels (Omni's own left
 * out), annotations and spec bytes, applied (finalizers are not compared: Omni's controllers may have
 * added theirs since); found otherwise, someone else's.
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

/** The same keys and values, the keys in `ignored` left out of both. */
function sameRecord(a: Record<string, string>, b: Record<string, string>, ignored: readonly string[] = []): boolean {
  const ka = Object.keys(a).filter((k) => !ignored.includes(k));
  const kb = Object.keys(b).filter((k) => !ignored.includes(k));
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// --- the read-backs ------------------------------------------------------------------------------

/** What a read-back found: applied (`after`: the resource as found), or send it again. */
export type ReadBack<T> = { applied: T; after?: Resource } | 'resend';

/** A Create of unknown outcome read back by its ID; someone else's resource there is AlreadyExists. */
export async function readBackCreate(
  core: CoreState,
  r: Resource,
  owner: string,
  opts: CallOptions,
): Promise<ReadBack<Resource>> {
  const ptr = pointerOf(r);
  const cur = await getIfExists(core, ptr, readOpts(opts));
  switch (createVerdict(r, owner, cur)) {
    case 'applied':
      return { applied: cur!, after: cur! };
    case 'not-applied':
      return 'resend';
    case 'changed':
      throw new AlreadyExistsError(
        `${describePointer(ptr)} exists with other content than this Create sent, whose outcome was unknown`,
        { method: '/cosi.resource.State/Create', resource: ptr },
      );
  }
}

/** An Update of unknown outcome read back; NotFound (a Get by this ID) is thrown as the Update's (rule 4). */
export async function readBackUpdate(core: CoreState, r: Resource, opts: CallOptions): Promise<ReadBack<Resource>> {
  const ptr = pointerOf(r);
  const cur = await core.get(ptr, readOpts(opts));
  switch (updateVerdict(r, cur)) {
    case 'applied':
      return { applied: cur, after: cur };
    case 'not-applied':
      return 'resend';
    case 'changed':
      throw changed('Update', ptr, r.metadata.version, cur);
  }
}

/** A Destroy of unknown outcome read back: applied only on a Get answering NotFound (rule 10). */
export async function readBackDestroy(core: CoreState, p: Pointer, opts: OwnerOptions): Promise<ReadBack<void>> {
  const ptr = pointerOf(p);
  const cur = await getIfExists(core, ptr, readOpts(opts));
  switch (destroyVerdict(opts.before, cur)) {
    case 'applied':
      return { applied: undefined };
    case 'not-applied':
      return 'resend';
    case 'changed':
      throw changed('Destroy', ptr, opts.before?.metadata.version ?? '', cur!);
  }
}

function readOpts(opts: CallOptions): CallOptions {
  return {
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  };
}

/**
 * Someone else wrote the resource while our write's outcome was unknown: the caller's conflict path
 * (FailedPrecondition) reads it again.
 */
function changed(
  method: 'Update' | 'Destroy',
  p: Pointer,
  sentVersion: string,
  cur: Resource,
): FailedPreconditionError {
  return new FailedPreconditionError(
    `${describePointer(p)} changed while the outcome of this ${method} was unknown (sent at version ` +
      `${sentVersion || '?'}, now ${cur.metadata.version}): read it again`,
    { method: `/cosi.resource.State/${method}`, resource: p },
  );
}
