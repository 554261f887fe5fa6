// A small in-memory State with COSI's storage rules (owner and version conflicts, no Destroy while
// finalizers remain), a kind watch, call counting, injectable failures, and a few of Omni's
// controllers (destroying released InfraMachines and MachineRequests, releasing its own finalizers
// on teardown). For tests of src/provider without the simulated Omni.

import type { Pointer, Resource } from '../../src/omni-client/resource.js';
import { cloneResource, describePointer, newMetadata, PHASE_RUNNING, PHASE_TEARING_DOWN, T } from '../../src/omni-client/resource.js';
import type { CallOptions, OwnerOptions, QueryOptions, RemoveFinalizersOptions, RemoveFinalizersResult, State, UpdateOptions, WatchEvent, WatchKindOptions } from '../../src/omni-client/types.js';
import { AlreadyExistsError, CanceledError, FailedPreconditionError, InvalidArgumentError, NotFoundError, OmniError, PermissionDeniedError } from '../../src/omni-client/errors.js';
import { observeWrite, type WriteIntent, type WriteObserver } from '../../src/omni-client/write-observer.js';

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

const key = (p: Pointer) => `${p.namespace}\u0000${p.type}\u0000${p.id}`;

export class FakeState implements State {
  readonly store = new Map<string, Resource>();
  readonly calls: Record<Method, number> = { get: 0, list: 0, create: 0, update: 0, destroy: 0, watch: 0 };
  readonly writes: { method: Method; pointer: Pointer; before?: Resource; after?: Resource }[] = [];
  private version = 1;
  readonly watchers = new Set<(e: WatchEvent) => void>();
  private readonly faults: { method: Method; error: () => Error; left: number; when?: (p: Pointer) => boolean }[] = [];
  readonly omni: FakeOmniBehaviour = {
    releasesOnTeardown: new Set(['MachineRequestStatusCleanupController', 'ConfigPatchRequestController', 'MachineStatusController']),
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
    for (const r of resources) this.put(r);
  }

  /** Stores a resource as Omni itself would (no rules), returning the stored copy. */
  put(r: Resource): Resource {
    const c = cloneResource(r);
    c.metadata.version = String(this.version++);
    const old = this.store.get(key(c.metadata));
    this.store.set(key(c.metadata), c);
    this.emit({ type: old ? 'updated' : 'created', resource: cloneResource(c), ...(old ? { old } : {}) });
    return cloneResource(c);
  }

  remove(p: Pointer): void {
    const old = this.store.get(key(p));
    if (!old) return;
    this.store.delete(key(p));
    this.emit({ type: 'destroyed', resource: old });
  }

  find(p: Pointer): Resource | undefined {
    const r = this.store.get(key(p));
    return r ? cloneResource(r) : undefined;
  }

  all(): Resource[] {
    return [...this.store.values()].map(cloneResource);
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

  async get(p: Pointer, opts?: CallOptions): Promise<Resource> {
    await this.enter('get', p, opts);
    const r = this.store.get(key(p));
    if (!r) throw new NotFoundError(`${describePointer(p)} not found`);
    return cloneResource(r);
  }

  async list(namespace: string, type: string, opts?: QueryOptions): Promise<Resource[]> {
    await this.enter('list', { namespace, type, id: '' }, opts);
    return [...this.store.values()].filter((r) => r.metadata.namespace === namespace && r.metadata.type === type && !this.hideFromLists?.(r)).map(cloneResource);
  }

  /** Runs a write between the observer's two calls, as GatewayState does. */
  private observed<T>(method: WriteIntent['method'], p: Pointer, opts: UpdateOptions | undefined, sent: Resource | undefined, run: () => Promise<T>): Promise<T> {
    const intent: WriteIntent = {
      method, resource: { namespace: p.namespace, type: p.type, id: p.id }, owner: opts?.owner ?? (method === 'Update' ? sent?.metadata.owner ?? '' : ''),
      ...(sent ? { sent } : {}), ...(opts?.before ? { before: opts.before } : {}), ...(opts?.expectedPhase ? { expectedPhase: opts.expectedPhase } : {}),
    };
    return observeWrite(this.onWrite, intent, () => run(), (v) => (v && typeof v === 'object' && 'metadata' in v ? (v as unknown as Resource) : undefined), opts?.signal);
  }

  create(r: Resource, opts?: OwnerOptions): Promise<Resource> {
    if (r.spec.omitted) return Promise.reject(new Error(`fake state: create of ${describePointer(r.metadata)} with a spec that was not kept`));
    return this.observed('Create', r.metadata, opts, r, () => this.doCreate(r, opts));
  }

  private async doCreate(r: Resource, opts?: OwnerOptions): Promise<Resource> {
    await this.enter('create', r.metadata, opts);
    if (this.store.has(key(r.metadata))) throw new AlreadyExistsError(`${describePointer(r.metadata)} already exists`);
    const c = cloneResource(r);
    c.metadata.owner = opts?.owner ?? '';
    const stored = this.put(c);
    this.writes.push({ method: 'create', pointer: r.metadata, after: stored });
    this.settle(stored);
    return stored;
  }

  update(r: Resource, opts?: UpdateOptions): Promise<Resource> {
    // The real client refuses this too (state.ts): it would erase the spec in Omni.
    if (r.spec.omitted) return Promise.reject(new Error(`fake state: update of ${describePointer(r.metadata)} with a spec that was not kept`));
    return this.observed('Update', r.metadata, opts, r, () => this.doUpdate(r, opts));
  }

  private async doUpdate(r: Resource, opts?: UpdateOptions): Promise<Resource> {
    await this.enter('update', r.metadata, opts);
    const cur = this.store.get(key(r.metadata));
    if (!cur) throw new NotFoundError(`${describePointer(r.metadata)} not found`);
    if (cur.metadata.owner !== (opts?.owner ?? '')) throw new PermissionDeniedError(`owner conflict on ${describePointer(r.metadata)}`);
    if (cur.metadata.version !== r.metadata.version) throw new FailedPreconditionError(`version conflict on ${describePointer(r.metadata)}`);
    if (opts?.expectedPhase && cur.metadata.phase !== opts.expectedPhase) throw new InvalidArgumentError('phase conflict');
    const before = cloneResource(cur);
    const c = cloneResource(r);
    c.metadata.owner = cur.metadata.owner;
    const stored = this.put(c);
    this.writes.push({ method: 'update', pointer: r.metadata, before, after: stored });
    this.settle(stored);
    return this.find(r.metadata) ?? stored;
  }

  destroy(p: Pointer, opts?: OwnerOptions): Promise<void> {
    return this.observed('Destroy', p, opts, undefined, () => this.doDestroy(p, opts));
  }

  private async doDestroy(p: Pointer, opts?: OwnerOptions): Promise<void> {
    await this.enter('destroy', p, opts);
    const cur = this.store.get(key(p));
    if (!cur) throw new NotFoundError(`${describePointer(p)} not found`);
    if (cur.metadata.owner !== (opts?.owner ?? '')) throw new PermissionDeniedError(`owner conflict on ${describePointer(p)}`);
    if (cur.metadata.finalizers.length > 0) throw new FailedPreconditionError(`${describePointer(p)} has pending finalizers`);
    this.writes.push({ method: 'destroy', pointer: p, before: cloneResource(cur) });
    this.remove(p);
  }

  async teardown(p: Pointer, opts?: CallOptions): Promise<boolean> {
    // As the gateway client: NotFound only while no Get of this call found it.
    const cur = await this.get(p, opts);
    if (cur.metadata.phase === PHASE_TEARING_DOWN) return cur.metadata.finalizers.length === 0;
    const next = cloneResource(cur);
    next.metadata.phase = PHASE_TEARING_DOWN;
    try {
      const after = await this.update(next, { ...opts, owner: cur.metadata.owner, expectedPhase: PHASE_RUNNING, before: cur });
      return after.metadata.finalizers.length === 0;
    } catch (e) {
      if (e instanceof NotFoundError) return true;
      throw e;
    }
  }

  async removeFinalizers(target: Resource | Pointer, finalizers: string[], opts?: RemoveFinalizersOptions): Promise<RemoveFinalizersResult> {
    let current: Resource | undefined = 'metadata' in target && !target.spec.omitted ? target : undefined;
    const drop = new Set(finalizers);
    // As the gateway client: `gone` only after a Get of this call found it, `not-found` otherwise.
    let found = false;
    for (let attempts = 1; attempts <= 8; attempts++) {
      if (!current) {
        try {
          current = await this.get('metadata' in target ? target.metadata : target, opts);
          found = true;
        } catch (e) {
          if (e instanceof NotFoundError) return { outcome: found ? 'gone' : 'not-found', attempts: attempts - 1 };
          throw e;
        }
      }
      if (opts?.requirePhase !== undefined && current.metadata.phase !== opts.requirePhase) return { outcome: 'phase-changed', before: current, attempts: attempts - 1 };
      const keep = current.metadata.finalizers.filter((f) => !drop.has(f));
      if (keep.length === current.metadata.finalizers.length) return { outcome: 'absent', before: current, attempts: attempts - 1 };
      const next = cloneResource(current);
      next.metadata.finalizers = keep;
      try {
        const after = await this.update(next, { ...opts, owner: current.metadata.owner, before: current });
        return { outcome: 'removed', before: current, after, attempts };
      } catch (e) {
        if (e instanceof NotFoundError) return { outcome: found ? 'gone' : 'not-found', before: current, attempts };
        if (!(e instanceof FailedPreconditionError || e instanceof PermissionDeniedError)) throw e;
        current = undefined;
      }
    }
    throw new FailedPreconditionError('too many conflicts');
  }

  watchKind(namespace: string, type: string, opts: WatchKindOptions = {}): AsyncIterable<WatchEvent[]> {
    const watch = (self: FakeState): AsyncIterable<WatchEvent[]> => ({
      async *[Symbol.asyncIterator]() {
        self.calls.watch++;
        const queue: WatchEvent[] = [];
        let wake: (() => void) | undefined;
        const listener = (e: WatchEvent) => {
          if (e.resource.metadata.namespace !== namespace || e.resource.metadata.type !== type) return;
          queue.push(e);
          wake?.();
        };
        self.watchers.add(listener);
        const onAbort = () => wake?.();
        opts.signal?.addEventListener('abort', onAbort);
        try {
          if (opts.bootstrapContents ?? true) {
            const boot = [...self.store.values()].filter((r) => r.metadata.namespace === namespace && r.metadata.type === type)
              .map((r): WatchEvent => ({ type: 'created', resource: cloneResource(r) }));
            const tomb: WatchEvent = { type: 'bootstrapped', resource: { metadata: newMetadata({ namespace, type, id: '' }), spec: { protoSpec: new Uint8Array() } } };
            yield [...boot, tomb];
          }
          while (!opts.signal?.aborted) {
            if (queue.length === 0) await new Promise<void>((res) => { wake = res; });
            wake = undefined;
            if (opts.signal?.aborted) return;
            if (queue.length > 0) yield queue.splice(0);
          }
        } finally {
          self.watchers.delete(listener);
          opts.signal?.removeEventListener('abort', onAbort);
        }
      },
    });
    return watch(this);
  }

  emit(e: WatchEvent): void {
    for (const w of this.watchers) w(e);
  }

  /** Omni's controllers, run synchronously after a write of ours. */
  private settle(r: Resource): void {
    this.afterWrite?.(r.metadata.version === 'undefined' ? 'create' : 'update', r);
    const cur = this.store.get(key(r.metadata));
    if (!cur || cur.metadata.phase !== PHASE_TEARING_DOWN) return;
    const keep = cur.metadata.finalizers.filter((f) => !this.omni.releasesOnTeardown.has(f));
    if (keep.length !== cur.metadata.finalizers.length) {
      // Omni lets go a moment later, as its controller would.
      setTimeout(() => {
        const now = this.store.get(key(r.metadata));
        if (!now) return;
        this.put({ ...now, metadata: { ...now.metadata, finalizers: now.metadata.finalizers.filter((f) => !this.omni.releasesOnTeardown.has(f)) } });
      }, 1);
    }
    const alone = this.omni.releasesWhenAlone;
    if (cur.metadata.finalizers.length > 0 && cur.metadata.finalizers.every((f) => alone.has(f))) {
      // ClusterMachineRequestStatusController: it lets go once nothing else holds the request.
      setTimeout(() => {
        const now = this.store.get(key(r.metadata));
        if (!now || !now.metadata.finalizers.every((f) => alone.has(f))) return;
        this.put({ ...now, metadata: { ...now.metadata, finalizers: [] } });
        if (this.omni.destroysReleased && OMNI_DESTROYS.includes(now.metadata.type)) this.remove(now.metadata);
      }, 1);
    }
    if (this.omni.destroysReleased && OMNI_DESTROYS.includes(cur.metadata.type) && cur.metadata.finalizers.length === 0) this.remove(cur.metadata);
  }
}

export function isOmniErr(e: unknown): e is OmniError {
  return e instanceof OmniError;
}
