// A State over any CoreState (src/omni-api/state.ts), in the manner of COSI's own (docs/cosi-semantics.md):
// teardown, removeFinalizers and the update-with-conflicts loop under both are written once here,
// and every backend (the gateway client, the sim's store in tests, the provider tests' double) gets
// them from here. The rules are docs/design.md's rules 3 and 4:
//   - Everything is written back as read but what the change is about; the owner is the current
//     owner. A read-only type accepts an Update only if nothing but the finalizers changed, unknown
//     spec fields included, so the spec bytes pass through untouched.
//   - A version conflict means read again and retry; a PermissionDenied after a concurrent change
//     (the read shows another version) too; a phase conflict too when an expected phase was sent.
//     Bounded: the last conflict is thrown when the attempts run out.
//   - NotFound is `gone` only once a Get of this call found the resource by its ID; before that it
//     is `not-found`: the resource given may have come from a List only, and that ID may never have
//     named anything.

import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { CanceledError, type NotFoundError } from '../omni-api/errors.js';
import { hasCode } from './errors.js';
import type { Pointer, Resource } from '../omni-api/resource.js';
import { PHASE_RUNNING, PHASE_TEARING_DOWN, cloneResource, pointerOf } from '../omni-api/resource.js';
import { defaultDelay, jitteredBackoff, type BackoffOptions, type DelayFn } from './transport/retry.js';
import type {
  CallOptions,
  CoreState,
  OwnerOptions,
  QueryOptions,
  RemoveFinalizersOptions,
  RemoveFinalizersResult,
  State,
  UpdateOptions,
  UpdateWithConflictsOptions,
  UpdateWithConflictsResult,
  WatchEvent,
  WatchKindOptions,
} from '../omni-api/state.js';

export interface ConflictPolicy {
  /** Update attempts of one update-with-conflicts before giving up. */
  attempts?: number;
  /** Backoff between attempts. */
  backoff?: BackoffOptions;
  delay?: DelayFn;
  random?: () => number;
  logger?: Logger;
}

/** The conflicts' retries and their backoff, in one place (docs/architecture.md, "A write, layer by layer"). */
export const CONFLICT_DEFAULTS = {
  attempts: 8,
  backoff: { baseMs: 20, capMs: 1_000 },
} as const satisfies ConflictPolicy;

/** The State of a backend: its own calls, and teardown, removeFinalizers and update-with-conflicts from here. */
export function wrapCore(core: CoreState, policy: ConflictPolicy = {}): State {
  return new WrappedState(core, policy);
}

/**
 * A CoreState that passes every call to another: the base of the decorators over a backend
 * (WrappedState here, pressure.ts's writes under back-pressure), which override what they add to.
 */
export class DelegatingCore implements CoreState {
  constructor(protected readonly core: CoreState) {}

  get(p: Pointer, opts?: CallOptions): Promise<Resource> {
    return this.core.get(p, opts);
  }

  list(namespace: string, type: string, opts?: QueryOptions): Promise<Resource[]> {
    return this.core.list(namespace, type, opts);
  }

  watchKind(namespace: string, type: string, opts?: WatchKindOptions): AsyncIterable<WatchEvent[]> {
    return this.core.watchKind(namespace, type, opts);
  }

  create(r: Resource, opts?: OwnerOptions): Promise<Resource> {
    return this.core.create(r, opts);
  }

  update(r: Resource, opts?: UpdateOptions): Promise<Resource> {
    return this.core.update(r, opts);
  }

  destroy(p: Pointer, opts?: OwnerOptions): Promise<void> {
    return this.core.destroy(p, opts);
  }
}

class WrappedState extends DelegatingCore implements State {
  readonly #attempts: number;
  readonly #backoff: BackoffOptions;
  readonly #delay: DelayFn;
  readonly #random: () => number;
  readonly #log: Logger;

  constructor(core: CoreState, policy: ConflictPolicy) {
    super(core);
    this.#attempts = policy.attempts ?? CONFLICT_DEFAULTS.attempts;
    this.#backoff = policy.backoff ?? CONFLICT_DEFAULTS.backoff;
    this.#delay = policy.delay ?? defaultDelay;
    this.#random = policy.random ?? Math.random;
    this.#log = policy.logger ?? silentLogger();
  }

  async updateWithConflicts<S extends string>(
    target: Resource | Pointer,
    change: (current: Resource) => Resource | S,
    opts: UpdateWithConflictsOptions = {},
  ): Promise<UpdateWithConflictsResult<S>> {
    const core = this.core;
    const ptr = pointerOf(target);
    const expectedPhase = opts.expectedPhase;
    // A resource read without its spec cannot be written back as read: read it first.
    let current: Resource | undefined = 'metadata' in target && !target.spec.omitted ? target : undefined;
    let before: Resource | undefined;
    let attempts = 0;
    // Whether a Get of this call found the resource by its ID (design rule 4).
    let found = false;
    for (;;) {
      if (!current) {
        try {
          current = await core.get(ptr, opts);
          found = true;
        } catch (e) {
          if (hasCode(e, 'OMNI_NOT_FOUND')) return notFound(found, before, attempts, e);
          throw e;
        }
      }
      before = current;
      const next = change(current);
      if (typeof next === 'string') return { outcome: next, before: current, attempts };
      attempts++;
      try {
        // The caller's options (the expected phase included), as the current owner.
        const after = await core.update(next, { ...opts, owner: current.metadata.owner, before: current });
        return { outcome: 'updated', before: current, after, attempts };
      } catch (e) {
        if (hasCode(e, 'OMNI_NOT_FOUND')) return notFound(found, before, attempts, e);
        if (attempts >= this.#attempts) throw e;
        if (
          hasCode(e, 'OMNI_FAILED_PRECONDITION') ||
          (expectedPhase !== undefined && hasCode(e, 'OMNI_INVALID_ARGUMENT'))
        ) {
          current = undefined;
        } else if (hasCode(e, 'OMNI_PERMISSION_DENIED')) {
          // Either access is refused (then the resource is unchanged: give up) or the resource changed
          // between our read and our write and no longer equals what we sent (retry).
          let fresh: Resource;
          try {
            fresh = await core.get(ptr, opts);
          } catch (g) {
            if (hasCode(g, 'OMNI_NOT_FOUND')) return notFound(found, before, attempts, g);
            throw g;
          }
          found = true;
          if (fresh.metadata.version === current.metadata.version) throw e;
          current = fresh;
        } else {
          throw e;
        }
        this.#log.debug(
          { resource: ptr, attempts, err: e.message },
          'update: the resource changed meanwhile; reading it again',
        );
        await this.#pause(attempts, opts);
      }
    }
  }

  async teardown(p: Pointer, opts: CallOptions = {}): Promise<boolean> {
    const r = await this.updateWithConflicts(
      pointerOf(p),
      (cur) => (cur.metadata.phase === PHASE_TEARING_DOWN ? 'tearing-down' : withPhase(cur)),
      { ...opts, expectedPhase: PHASE_RUNNING },
    );
    switch (r.outcome) {
      case 'updated':
        return r.after.metadata.finalizers.length === 0;
      case 'tearing-down':
        return r.before.metadata.finalizers.length === 0;
      case 'gone':
        // Read by this ID a moment ago and gone now: destroyed meanwhile, nothing holds it.
        return true;
      case 'not-found':
        // No Get of this call found it: the caller may not know whether the ID ever named anything.
        throw r.error;
    }
  }

  async removeFinalizers(
    target: Resource | Pointer,
    finalizers: readonly string[],
    opts: RemoveFinalizersOptions = {},
  ): Promise<RemoveFinalizersResult> {
    // The finalizers to drop are a few: looked up in their list, no Set per call.
    const requirePhase = opts.requirePhase;
    const r = await this.updateWithConflicts(
      target,
      (cur) => {
        if (requirePhase !== undefined && cur.metadata.phase !== requirePhase) return 'phase-changed';
        const keep = cur.metadata.finalizers.filter((f) => !finalizers.includes(f));
        return keep.length === cur.metadata.finalizers.length ? 'absent' : withFinalizers(cur, keep);
      },
      opts,
    );
    if (r.outcome === 'updated') return { outcome: 'removed', before: r.before, after: r.after, attempts: r.attempts };
    return { outcome: r.outcome, ...(r.before ? { before: r.before } : {}), attempts: r.attempts };
  }

  async #pause(attempt: number, opts: CallOptions): Promise<void> {
    try {
      await this.#delay(jitteredBackoff(attempt - 1, this.#backoff, this.#random), opts.signal);
    } catch {
      throw new CanceledError('cancelled by the caller', { cause: opts.signal?.reason });
    }
  }
}

function notFound<S extends string>(
  found: boolean,
  before: Resource | undefined,
  attempts: number,
  error: NotFoundError,
): UpdateWithConflictsResult<S> {
  return { outcome: found ? 'gone' : 'not-found', ...(before ? { before } : {}), attempts, error };
}

function withPhase(r: Resource): Resource {
  const next = cloneResource(r);
  next.metadata.phase = PHASE_TEARING_DOWN;
  return next;
}

function withFinalizers(r: Resource, finalizers: string[]): Resource {
  const next = cloneResource(r);
  next.metadata.finalizers = finalizers;
  return next;
}
