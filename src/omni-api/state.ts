// The State API as the rest of the program sees it, in two layers as cosi-project/runtime has them:
// a CoreState (get, list, watch, create, update, destroy) is a backend (the client's GatewayState over
// Omni's gateway; in tests, the sim's store); a State is a CoreState wrapped by the client's `wrap.ts`,
// which writes teardown, removeFinalizers and update-with-conflicts once, over any backend.

import type { NotFoundError } from './errors.js';
import type { Phase, Pointer, Resource } from './resource.js';

export interface CallOptions {
  /** Cancels the call (and, for streams, the stream). */
  signal?: AbortSignal;
  /** Per-call timeout in milliseconds; the client's default applies when absent. */
  timeoutMs?: number;
  /**
   * Where the call queues when calls wait for a place (the client's call limit and write window): lowest first,
   * in arrival order among equals. Absent: 0, ahead of every ranked call. A run ranks an item's calls by when the
   * item started, so that items under way finish before new ones start (depth first).
   */
  rank?: number;
  /**
   * A write: not started (nor sent again) at or after this time, in ms of the client's clock (Date.now); it throws
   * STUB_DEADLINE instead, without sending anything. A write already sent is not cancelled by it.
   */
  notAfter?: number;
}

export type LabelOp = 'EXISTS' | 'EQUAL' | 'NOT_EXISTS' | 'IN' | 'LT' | 'LTE' | 'LT_NUMERIC' | 'LTE_NUMERIC';

export interface LabelTerm {
  key: string;
  op: LabelOp;
  value?: string[];
  invert?: boolean;
}

/** Terms inside one query are AND-ed; the queries of a list are OR-ed (docs/cosi-semantics.md, "List"). */
export type LabelQuery = LabelTerm[];

export interface QueryOptions extends CallOptions {
  labelQueries?: LabelQuery[];
  /** RE2, unanchored (docs/cosi-semantics.md, "List"). */
  idRegexp?: string;
  /**
   * A List: told how many resources came in so far, every LIST_PROGRESS_EVERY while they stream (a backend that
   * answers at once may never tell). For what a person sees while a long List is read; nothing decides on it.
   */
  onProgress?: (count: number) => void;
  /**
   * A List: what the caller keeps of each resource, applied as each arrives (the List then answers what it
   * returned). A caller that keeps less than the whole resource (the caches: slim.ts) lets what it drops go
   * at once, where it would be held (and copied by the garbage collector) until the List ends. A backend
   * may answer whole resources instead.
   */
  keep?: (r: Resource) => Resource;
}

/** How often a List's onProgress is told. */
export const LIST_PROGRESS_EVERY = 500;

export type WatchEventType = 'created' | 'updated' | 'destroyed' | 'bootstrapped' | 'errored' | 'noop';

export interface WatchEvent {
  type: WatchEventType;
  /** For bootstrapped and noop: a tombstone (namespace + type, id "", version `undefined`). */
  resource: Resource;
  old?: Resource;
  error?: string;
  bookmark?: Uint8Array;
}

export interface WatchKindOptions extends QueryOptions {
  /** Send the current contents first (CREATED each, then BOOTSTRAPPED). Default true. */
  bootstrapContents?: boolean;
  /** Called when the watch restarted from scratch (bookmark refused): the consumer should drop its cache. */
  onReset?: () => void;
  /**
   * Asked before each message is read: true leaves it unread (not decoded, not yielded; a backend may
   * read it anyway) and calls `onSkipped`. A consumer that skips no longer follows the kind: it must read
   * the kind again before it trusts what it holds. Its bookmark is not taken from a skipped message.
   */
  skip?: () => boolean;
  onSkipped?: () => void;
  /**
   * Whether the consumer reads an UPDATED event's previous state (`old`). Default true. False leaves
   * it unread (neither decoded nor checked: it is not data) and absent from the events; a backend may
   * deliver it anyway.
   */
  previous?: boolean;
  /**
   * Called when a stream broke, before the watch reconnects: `inARow` counts the streams in a row that
   * broke without delivering anything within their first minutes (0 after one that did). A consumer
   * may stop watching (abort) and read the kind otherwise.
   */
  onBreak?: (inARow: number) => void;
}

export interface OwnerOptions extends CallOptions {
  /** Defaults to "" for create; for update/destroy/teardown the caller passes the stored owner. */
  owner?: string;
  /** The resource as the caller read it, for the write observer (the audit log's "before"); never sent. */
  before?: Resource;
}

export interface UpdateOptions extends OwnerOptions {
  /** Absent = any phase (the `expected_phase` field is then not sent). */
  expectedPhase?: Phase;
}

export interface RemoveFinalizersOptions extends CallOptions {
  /**
   * Act only while the resource is in this phase. Checked on the resource given and on every re-read:
   * a tearing-down resource that was destroyed and re-created with the same ID (running) between our
   * read and a retry is left alone (outcome `phase-changed`), so a retry never releases a running machine.
   */
  requirePhase?: Phase;
}

export interface RemoveFinalizersResult {
  /**
   * `removed`: an Update was made; `absent`: none of them was there; `phase-changed`: the resource is
   * not (or no longer) in the required phase, nothing written. NotFound is one of two outcomes:
   * `gone` when a Get of this call had found the resource by its ID first (it was destroyed
   * meanwhile: nothing to do), `not-found` when nothing in this call found it by its ID (the
   * resource given may have come from a List only: done only if the caller read it by that ID
   * before, design rule 4).
   */
  outcome: 'removed' | 'absent' | 'gone' | 'not-found' | 'phase-changed';
  /** The resource before and after (after is absent when gone or absent). */
  before?: Resource;
  after?: Resource;
  /** Number of Update attempts made (conflicts retried). */
  attempts: number;
}

/** What every backend implements. */
export interface CoreState {
  get(p: Pointer, opts?: CallOptions): Promise<Resource>;
  list(namespace: string, type: string, opts?: QueryOptions): Promise<Resource[]>;
  /**
   * A kind watch that survives broken streams: resumes from the last bookmark with capped, jittered
   * backoff; when the bookmark is refused, restarts from scratch (calling `onReset`). Yields batches
   * (aggregated). Ends when the signal aborts; throws on an ERRORED event or a fatal error.
   */
  watchKind(namespace: string, type: string, opts?: WatchKindOptions): AsyncIterable<WatchEvent[]>;
  create(r: Resource, opts?: OwnerOptions): Promise<Resource>;
  update(r: Resource, opts?: UpdateOptions): Promise<Resource>;
  destroy(p: Pointer, opts?: OwnerOptions): Promise<void>;
}

export interface UpdateWithConflictsOptions extends CallOptions {
  /**
   * Sent with every Update (teardown sends `running`). A phase conflict (InvalidArgument) is then
   * read again and retried like a version conflict; without it, InvalidArgument is a refusal.
   */
  expectedPhase?: Phase;
}

/**
 * How an update-with-conflicts ended. `updated`: an Update was made. Any other string: what `change`
 * answered instead of a resource to write (nothing written). NotFound is one of two outcomes: `gone`
 * when a Get of this call had found the resource by its ID first (it was destroyed meanwhile),
 * `not-found` when nothing in this call found it by its ID (the resource given may have come from a
 * List only: done only if the caller read it by that ID before, design rule 4).
 */
export type UpdateWithConflictsResult<S extends string> =
  | { outcome: 'updated'; before: Resource; after: Resource; attempts: number }
  | { outcome: S; before: Resource; attempts: number }
  | { outcome: 'gone' | 'not-found'; before?: Resource; attempts: number; error: NotFoundError };

export interface State extends CoreState {
  /**
   * Reads the resource (unless given one already read, with its spec), asks `change` what to write
   * (a resource, or a string saying why nothing), and Updates it as its current owner. A version
   * conflict means read again and ask again; so does a PermissionDenied when the read shows the
   * resource changed meanwhile (on a read-only type, Omni answers an Update that no longer equals the
   * stored resource but for its finalizers so), and a phase conflict with `expectedPhase`. Bounded;
   * the last conflict is thrown when attempts run out.
   */
  updateWithConflicts<S extends string>(
    target: Resource | Pointer,
    change: (current: Resource) => Resource | S,
    opts?: UpdateWithConflictsOptions,
  ): Promise<UpdateWithConflictsResult<S>>;
  /**
   * Get + Update of the phase to `tearingDown` (owner = current owner, expected phase `running`);
   * no write when already tearing down. Returns whether nothing holds it any more: no finalizers,
   * or destroyed meanwhile (a NotFound after its Get had found it). Throws NotFound only when no Get
   * of this call found the resource; once it returns, the resource was read by its ID.
   */
  teardown(p: Pointer, opts?: CallOptions): Promise<boolean>;
  /**
   * One Update removing all the given finalizers; spec bytes, labels, annotations, owner and phase
   * sent back exactly as read; `expected_phase` absent. Given a Resource already read, the first
   * attempt uses it without a Get. Retries as updateWithConflicts does. NotFound is `gone` or
   * `not-found` (see the result).
   */
  removeFinalizers(
    target: Resource | Pointer,
    finalizers: readonly string[],
    opts?: RemoveFinalizersOptions,
  ): Promise<RemoveFinalizersResult>;
}
