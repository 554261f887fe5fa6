// The provider tests' in-memory State: the sim's COSI store as a CoreState (store-state.ts), so its
// storage rules are the sim's (versions, owner, phase and finalizer rules, timestamps, label and ID
// queries, watches with bootstrap, bookmarks and label transitions), teardown, removeFinalizers and
// update-with-conflicts the client's own (src/omni-client/wrap.ts), plus only what a double adds:
// call counting, a log of writes, injectable failures, and a few of Omni's controllers (destroying
// released InfraMachines and MachineRequests, releasing its own finalizers on teardown). No access
// rules: for those, tests use the simulated Omni. The State conformance suite
// (test/omni-api/state-conformance.test.ts) holds it to the same rules as the sim and the client.

import type { Pointer, Resource } from '../../src/omni-api/resource.js';
import { PHASE_TEARING_DOWN, T } from '../../src/omni-api/resource.js';
import type {
  CallOptions,
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
} from '../../src/omni-api/state.js';
import { CanceledError } from '../../src/omni-api/errors.js';
import { wrapCore } from '../../src/omni-client/wrap.js';
import { observeWrite, type WriteIntent, type WriteObserver } from '../../src/omni-client/write/observer.js';
import type { Identity } from '../../src/omni-sim/api.js';
import { StoreState } from './store-state.js';

type Method = 'get' | 'list' | 'create' | 'update' | 'destroy' | 'watch';

export interface FakeOmniBehaviour {
  /** Omni's finalizers that Omni removes by itself once the resource is tearing down. */
  releasesOnTeardown: Set<string>;
  /** Omni's finalizers that Omni removes once no other finalizer is left on the torn-down resource. */
  releasesWhenAlone: Set<string>;
  /** Destroy InfraMachines / MachineRequests / BMCConfigs that are tearing down without finalizers. */
  destroysReleased: boolean;
}

/** What Omni destroys once it is torn down and free of finalizers. */
const OMNI_DESTROYS: string[] = [T.InfraMachine, T.MachineRequest, T.BMCConfig];

/** Omni itself: writes without the client's rules (any owner, any version). */
const OMNI: Identity = { name: 'omni', email: 'omni', role: 'Admin', internal: true };

export class FakeState extends StoreState implements State {
  readonly calls: Record<Method, number> = { get: 0, list: 0, create: 0, update: 0, destroy: 0, watch: 0 };
  readonly writes: { method: Method; pointer: Pointer; before?: Resource; after?: Resource }[] = [];
  private readonly faults: { method: Method; error: () => Error; left: number; when?: (p: Pointer) => boolean }[] = [];
  readonly omni: FakeOmniBehaviour = {
    releasesOnTeardown: new Set([
      'MachineRequestStatusCleanupController',
      'ConfigPatchRequestController',
      'MachineStatusController',
    ]),
    releasesWhenAlone: new Set(['ClusterMachineRequestStatusController']),
    destroysReleased: true,
  };
  /** Hook run after every write (for concurrent-writer tests). */
  afterWrite?: (method: Method, r: Resource) => void;
  /** The write observer, as GatewayState's `onWrite` (the audit log). */
  onWrite?: WriteObserver;
  /** Resources a List leaves out (as a proxy withholding lines would); Get and the watch still see them. */
  hideFromLists?: (r: Resource) => boolean;

  constructor(resources: Resource[] = []) {
    super();
    for (const r of resources) this.put(r);
  }

  /** Stores a resource as Omni itself would (no rules: owner and version as it likes), returning the stored copy. */
  put(r: Resource): Resource {
    const cur = this.store.peek(r.metadata);
    if (!cur)
      return this.store.create(OMNI, { ...r, metadata: { ...r.metadata, version: 'undefined' } }, r.metadata.owner);
    return this.store.update(
      OMNI,
      { ...r, metadata: { ...r.metadata, version: cur.metadata.version } },
      cur.metadata.owner,
    );
  }

  /** Removes a resource as Omni itself would, finalizers or not. */
  remove(p: Pointer): void {
    let cur = this.store.peek(p);
    if (!cur) return;
    if (cur.metadata.finalizers.length > 0) cur = this.put({ ...cur, metadata: { ...cur.metadata, finalizers: [] } });
    this.store.destroy(OMNI, p, cur.metadata.owner);
  }

  find(p: Pointer): Resource | undefined {
    return this.store.peek(p);
  }

  all(): Resource[] {
    return this.store.all();
  }

  fail(method: Method, error: () => Error, times = 1, when?: (p: Pointer) => boolean): void {
    this.faults.push({ method, error, left: times, ...(when ? { when } : {}) });
  }

  private async enter(method: Method, p: Pointer, opts?: CallOptions): Promise<void> {
    this.calls[method]++;
    await Promise.resolve();
    if (opts?.signal?.aborted) throw new CanceledError('cancelled');
    const f = this.faults.find((x) => x.method === method && x.left > 0 && (!x.when || x.when(p)));
    if (f) {
      f.left--;
      throw f.error();
    }
  }

  override async get(p: Pointer, opts?: CallOptions): Promise<Resource> {
    await this.enter('get', p, opts);
    return super.get(p, opts);
  }

  override async list(namespace: string, type: string, opts?: QueryOptions): Promise<Resource[]> {
    await this.enter('list', { namespace, type, id: '' }, opts);
    const rs = await super.list(namespace, type, opts);
    return this.hideFromLists ? rs.filter((r) => !this.hideFromLists!(r)) : rs;
  }

  /** Runs a write between the observer's two calls, as GatewayState does. */
  private observed<T>(
    method: WriteIntent['method'],
    p: Pointer,
    opts: UpdateOptions | undefined,
    sent: Resource | undefined,
    run: () => Promise<T>,
  ): Promise<T> {
    const intent: WriteIntent = {
      method,
      resource: { namespace: p.namespace, type: p.type, id: p.id },
      owner: opts?.owner ?? sent?.metadata.owner ?? '',
      ...(sent ? { sent } : {}),
      ...(opts?.before ? { before: opts.before } : {}),
      ...(opts?.expectedPhase ? { expectedPhase: opts.expectedPhase } : {}),
    };
    return observeWrite(
      this.onWrite,
      intent,
      () => run(),
      (v) => (v && typeof v === 'object' && 'metadata' in v ? (v as unknown as Resource) : undefined),
      opts?.signal,
    );
  }

  override async create(r: Resource, opts?: OwnerOptions): Promise<Resource> {
    // The real client refuses this too (state.ts): it would erase the spec in Omni.
    if (r.spec.omitted) throw new Error('fake state: create with a spec that was not kept');
    return this.observed('Create', r.metadata, opts, r, async () => {
      await this.enter('create', r.metadata, opts);
      const stored = await super.create(r, opts);
      this.writes.push({ method: 'create', pointer: r.metadata, after: stored });
      this.settle('create', stored);
      return stored;
    });
  }

  override async update(r: Resource, opts?: UpdateOptions): Promise<Resource> {
    if (r.spec.omitted) throw new Error('fake state: update with a spec that was not kept');
    return this.observed('Update', r.metadata, opts, r, async () => {
      await this.enter('update', r.metadata, opts);
      const before = this.store.peek(r.metadata);
      const stored = await super.update(r, opts);
      this.writes.push({ method: 'update', pointer: r.metadata, ...(before ? { before } : {}), after: stored });
      this.settle('update', stored);
      return stored;
    });
  }

  override async destroy(p: Pointer, opts?: OwnerOptions): Promise<void> {
    return this.observed('Destroy', p, opts, undefined, async () => {
      await this.enter('destroy', p, opts);
      const before = this.store.peek(p);
      await super.destroy(p, opts);
      this.writes.push({ method: 'destroy', pointer: p, ...(before ? { before } : {}) });
    });
  }

  // Teardown, removeFinalizers and update-with-conflicts: the client's own (src/omni-client/wrap.ts)
  // over this double's counted, fault-injectable calls, without pauses between attempts.
  readonly #wrapped: State = wrapCore(this, { delay: async () => undefined });

  updateWithConflicts<S extends string>(
    target: Resource | Pointer,
    change: (current: Resource) => Resource | S,
    opts?: UpdateWithConflictsOptions,
  ): Promise<UpdateWithConflictsResult<S>> {
    return this.#wrapped.updateWithConflicts(target, change, opts);
  }

  teardown(p: Pointer, opts?: CallOptions): Promise<boolean> {
    return this.#wrapped.teardown(p, opts);
  }

  removeFinalizers(
    target: Resource | Pointer,
    finalizers: readonly string[],
    opts?: RemoveFinalizersOptions,
  ): Promise<RemoveFinalizersResult> {
    return this.#wrapped.removeFinalizers(target, finalizers, opts);
  }

  override watchKind(namespace: string, type: string, opts: WatchKindOptions = {}): AsyncIterable<WatchEvent[]> {
    const inner = super.watchKind(namespace, type, opts);
    const calls = this.calls;
    return {
      [Symbol.asyncIterator]() {
        calls.watch++;
        return inner[Symbol.asyncIterator]();
      },
    };
  }

  /** Omni's controllers, run after a write of ours. */
  private settle(method: Method, r: Resource): void {
    this.afterWrite?.(method, r);
    const cur = this.store.peek(r.metadata);
    if (!cur || cur.metadata.phase !== PHASE_TEARING_DOWN) return;
    const keep = cur.metadata.finalizers.filter((f) => !this.omni.releasesOnTeardown.has(f));
    if (keep.length !== cur.metadata.finalizers.length) {
      // Omni lets go a moment later, as its controller would.
      setTimeout(() => {
        const now = this.store.peek(r.metadata);
        if (!now) return;
        this.put({
          ...now,
          metadata: {
            ...now.metadata,
            finalizers: now.metadata.finalizers.filter((f) => !this.omni.releasesOnTeardown.has(f)),
          },
        });
      }, 1);
    }
    const alone = this.omni.releasesWhenAlone;
    if (cur.metadata.finalizers.length > 0 && cur.metadata.finalizers.every((f) => alone.has(f))) {
      // ClusterMachineRequestStatusController: it lets go once nothing else holds the request.
      setTimeout(() => {
        const now = this.store.peek(r.metadata);
        if (!now || !now.metadata.finalizers.every((f) => alone.has(f))) return;
        const freed = this.put({ ...now, metadata: { ...now.metadata, finalizers: [] } });
        if (this.omni.destroysReleased && OMNI_DESTROYS.includes(freed.metadata.type)) this.remove(freed.metadata);
      }, 1);
    }
    if (this.omni.destroysReleased && OMNI_DESTROYS.includes(cur.metadata.type) && cur.metadata.finalizers.length === 0)
      this.remove(cur.metadata);
  }
}
