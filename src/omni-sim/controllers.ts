// What Omni does by itself, for the scenario's Omni version (docs/omni-lifecycle.md 3.2, 4, 6, 7.3 and 8), acting
// on the store as Omni's internal actor. Each controller is level-triggered and idempotent: a store
// event queues the objects it concerns, a drain (on the next macrotask, never synchronously inside
// a caller's write) reconciles each of them from the current state, and a pass that finds nothing to
// do writes nothing. No timers, no polling.
//
// Emulated, by version:
//   all        InfraMachine / MachineRequest / Link / Machine destroyed by their owners once torn down and
//              free of finalizers; a torn-down Link tears down its InfraMachine and Machine; Omni's own
//              finalizers (ClusterMachineRequestStatusController, MachineRequestStatusCleanupController,
//              ConfigPatchRequestController, ...) are added to Running resources and released after
//              teardown once what each waits for in Omni is gone (cluster_machine_request_status.go,
//              machine_request_cleanup.go, infra_provider_config_patch.go at v1.3.4 and v1.9.3).
//   0.50+      deleting infra.Provider: statuses with owner "" destroyed, service account deleted.
//   1.0+       ... and ProviderJoinConfig destroyed.
//   1.4+       InfraMachineController finalizer on static machines' Links; InfraMachine finalizers
//              stripped once the Link is going and the provider is gone or tearing down; the rest of the
//              provider cleanup (Links, InfraMachineStatuses, MachineRequestStatuses, every user-owned
//              MachineRequestSet); MachineRequests of a set being torn down stripped of all but
//              ClusterMachineRequestStatusController; registrations of a deleted provider refused;
//              provider ID a label (not an annotation) on Links and Machines.
//   1.7+       MachineRequests without owner; a MachineRequestSet that still wants machines gets
//              replacement requests `<set>-<6 random chars>`.
// The provider-deletion refusal (1.4+) is a validation of the API and lives in access.ts.

import { randomBytes } from 'node:crypto';
import type { OmniError } from '../omni-client/errors.js';
import { errorFromStatus, GrpcCode } from '../omni-client/errors.js';
import type { Pointer, Resource } from '../omni-client/resource.js';
import {
  cloneResource, LABEL_INFRA_PROVIDER_ID, LABEL_MACHINE_REQUEST_SET, newMetadata, NS_DEFAULT, NS_EPHEMERAL, NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL, PHASE_RUNNING, PHASE_TEARING_DOWN, T,
} from '../omni-client/resource.js';
import { decodeSpec, encodeSpec, MachineRequestSetSpec, MachineRequestSpec, MachineRequestStatusSpec, updateSpec } from '../omni-client/specs.js';
import { EventType } from '../omni-client/wire.js';
import type { SimClock, StateApi } from './api.js';
import { INTERNAL } from './api.js';
import { EMPTY_QUERY } from './query.js';
import type { StoreEvent } from './store.js';
import type { OmniVersion } from './version.js';
import { atLeast, parseVersion } from './version.js';

/** Omni's controller names, used as owners and finalizers. */
export const C = {
  InfraMachine: 'InfraMachineController',
  InfraMachineRegistration: 'InfraMachineRegistrationController',
  Machine: 'MachineController',
  LinkCleanup: 'LinkCleanupController',
  MachineRequestSetStatus: 'MachineRequestSetStatusController',
  ClusterMachineRequestStatus: 'ClusterMachineRequestStatusController',
  MachineRequestStatusCleanup: 'MachineRequestStatusCleanupController',
  ConfigPatchRequest: 'ConfigPatchRequestController',
  InfraProviderCleanup: 'InfraProviderCleanupController',
  ProviderJoinConfig: 'ProviderJoinConfigController',
  InfraProviderStatus: 'InfraProviderStatusController',
} as const;

/** Kinds of `default` that Omni's MachineRequestStatusCleanupController waits for (by the status's machine ID). */
const MACHINE_SET_NODE = 'MachineSetNodes.omni.sidero.dev';
const CLUSTER_MACHINE = 'ClusterMachines.omni.sidero.dev';
/** Before 1.4, ClusterMachineRequestStatusController also let go past this one (a ClusterMachine finalizer). */
const CLUSTER_MACHINE_ENCRYPTION_KEY = 'ClusterMachineEncryptionKeyController';

/** Omni finalizers on a Machine whose controllers finish right away in the sim (no Talos to reset). */
const MACHINE_FINALIZERS = new Set(['MachineStatusController', 'MachineCleanupController', 'MachineTeardownController', 'MachineSetNodeController']);

/** The store as controllers use it: the COSI API plus change notifications (SimStore). */
export interface ControllerStore extends StateApi {
  onEvent(cb: (e: StoreEvent) => void): () => void;
  /** A copy of the stored resource, or undefined: no NotFound error built and thrown per absent resource. */
  peek(p: Pointer): Resource | undefined;
  /** The stored resources of one kind, not copied (SimStore.viewKind). */
  viewKind(namespace: string, type: string): Iterable<Readonly<Resource>>;
}

export interface OmniControllerOptions {
  version: OmniVersion | string;
  clock?: SimClock;
  /** InfraProviderCleanupController deleted the account `infra-provider:<id>` (wire to IdentityRegistry.removeProvider). */
  onServiceAccountDeleted?: (providerId: string) => void;
  /** Adds Omni's own finalizers to Running resources that lack them (default true). */
  addFinalizers?: boolean;
  /** The 6-character suffix of replacement MachineRequest IDs (default: random lower-case alphanumerics). */
  randomSuffix?: () => string;
  /**
   * Told of each unexpected controller failure (recorded in `failures` and thrown by `idle()` either
   * way). Without it, a failure goes to the process-wide listeners of onControllerFailure.
   */
  onError?: (err: ControllerError) => void;
}

export interface StaticMachineOptions {
  /** Also create the `omni.Machine`, as Omni does once the machine is accepted. Default false. */
  accepted?: boolean;
}

export interface MachineRequestOptions {
  providerId: string;
  /** Default `<set>-<6 random chars>` for set members; required otherwise. */
  id?: string;
  /** The MachineRequestSet it belongs to (label `omni.sidero.dev/machine-request-set`). */
  set?: string;
  talosVersion?: string;
}

export interface MachineRequestSetOptions {
  id: string;
  providerId: string;
  machineCount: number;
  talosVersion?: string;
}

export interface OmniControllers {
  stop(): void;
  /**
   * Resolves once every queued reconcile has run (for tests and the demo); rejects with the first
   * failure when a controller has failed: a sim that stopped reconciling is not idle, it is broken.
   */
  idle(): Promise<void>;
  /** The unexpected failures so far (the first MAX_FAILURES_KEPT). */
  readonly failures: readonly ControllerError[];
  /** The UI's "delete machine": tears down `Links/<uuid>`. */
  deleteMachine(uuid: string): void;
  /** Sets the MachineRequestSet's machine_count to `count`; the extra requests are torn down. */
  scaleDown(set: string, count: number): void;
  /** A static provider's machine connects: Link, MachineRegistration and a pending InfraMachine. Refused on 1.4+ for a provider that is gone or tearing down. */
  registerStaticMachine(providerId: string, uuid: string, opts?: StaticMachineOptions): { link: Resource; infraMachine: Resource; machine?: Resource };
  /** A MachineRequest as Omni creates it (owner "" from 1.7, MachineRequestSetStatusController before). */
  createMachineRequest(opts: MachineRequestOptions): Resource;
  /** A user-owned MachineRequestSet with its first `machineCount` requests. */
  createMachineRequestSet(opts: MachineRequestSetOptions): { set: Resource; requests: Resource[] };
}

/** The fields a MachineRequest copies from its set, left empty by the sim. */
const REQUEST_DEFAULTS = { extensions: [], kernel_args: [], meta_values: [], provider_data: '', grpc_tunnel: 0 };

const MAX_TASKS_PER_DRAIN = 5000;
const MAX_RETRIES = 5;
const MAX_FAILURES_KEPT = 100;

/**
 * An error inside one of the sim's controllers that is not part of reconciling (a NotFound of what
 * went meanwhile, a version conflict retried): a bug of the sim, or a state it cannot reconcile.
 * Omni would log it and retry forever; the sim records it so that the test that caused it fails.
 */
export class ControllerError extends Error {
  constructor(readonly task: string, cause: unknown) {
    super(`the simulated Omni's controller task ${task} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ControllerError';
  }
}

const failureListeners = new Set<(f: ControllerError) => void>();

/**
 * Tells `listener` of every controller failure, in this process, of controllers started without an
 * `onError` of their own: nobody else hears of it (the test setup, test/setup.ts, fails the test
 * during which one happened). Returns the unsubscribe function.
 */
export function onControllerFailure(listener: (f: ControllerError) => void): () => void {
  failureListeners.add(listener);
  return () => failureListeners.delete(listener);
}
const ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';

function defaultSuffix(): string {
  const b = randomBytes(6);
  return [...b].map((x) => ALNUM[x % ALNUM.length]).join('');
}

const ptr = (namespace: string, type: string, id: string): Pointer => ({ namespace, type, id });

function eqLabel(key: string, value: string) {
  return { labelQueries: [[{ key, op: 1, value: [value], invert: false }]], idRegexp: '' };
}

export function startOmniControllers(store: ControllerStore, opts: OmniControllerOptions): OmniControllers {
  return new Controllers(store, opts);
}

class Controllers implements OmniControllers {
  private readonly v: OmniVersion;
  private readonly queue = new Set<string>();
  private readonly retries = new Map<string, number>();
  private scheduled: ReturnType<typeof setImmediate> | undefined;
  private waiters: Array<() => void> = [];
  private stopped = false;
  readonly failures: ControllerError[] = [];
  private readonly unsubscribe: () => void;
  private readonly addFinalizers: boolean;
  private readonly suffix: () => string;

  constructor(private readonly store: ControllerStore, private readonly opts: OmniControllerOptions) {
    this.v = typeof opts.version === 'string' ? parseVersion(opts.version) : opts.version;
    this.addFinalizers = opts.addFinalizers ?? true;
    this.suffix = opts.randomSuffix ?? defaultSuffix;
    this.unsubscribe = store.onEvent((e) => this.onEvent(e));
    // Omni reconciles everything it finds when it starts.
    for (const [ns, type, task] of [
      [NS_DEFAULT, T.Link, 'link'], [NS_DEFAULT, T.Machine, 'machine'], [NS_INFRA_PROVIDER, T.InfraMachine, 'im'],
      [NS_INFRA_PROVIDER, T.MachineRequest, 'mr'], [NS_INFRA_PROVIDER, T.MachineRequestStatus, 'mrs'],
      [NS_INFRA_PROVIDER, T.ConfigPatchRequest, 'cpr'], [NS_INFRA_PROVIDER, T.InfraProvider, 'provider'], [NS_DEFAULT, T.MachineRequestSet, 'set'],
    ] as const) {
      for (const r of this.list(ns, type)) this.enqueue(`${task}:${r.metadata.id}`);
    }
  }

  // -- plumbing ---------------------------------------------------------------------------------

  stop(): void {
    this.stopped = true;
    this.unsubscribe();
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    this.queue.clear();
    this.flushWaiters();
  }

  async idle(): Promise<void> {
    if (!this.stopped && (this.queue.size > 0 || this.scheduled)) await new Promise<void>((resolve) => this.waiters.push(resolve));
    if (this.failures[0]) throw this.failures[0];
  }

  private fail(task: string, e: unknown): void {
    const f = new ControllerError(task, e);
    if (this.failures.length < MAX_FAILURES_KEPT) this.failures.push(f);
    if (this.opts.onError) this.opts.onError(f);
    else for (const l of failureListeners) l(f);
  }

  private flushWaiters(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private enqueue(task: string): void {
    if (this.stopped) return;
    this.queue.add(task);
    this.scheduled ??= setImmediate(() => this.drain());
  }

  private drain(): void {
    this.scheduled = undefined;
    let n = 0;
    while (this.queue.size > 0 && n < MAX_TASKS_PER_DRAIN && !this.stopped) {
      const task = this.queue.values().next().value as string;
      this.queue.delete(task);
      n++;
      try {
        this.run(task);
        this.retries.delete(task);
      } catch (e) {
        const code = (e as OmniError).grpcCode;
        if (code === GrpcCode.NotFound) continue; // gone meanwhile: nothing to do
        const attempts = (this.retries.get(task) ?? 0) + 1;
        // A version conflict means someone wrote in between: reconcile again from the new state.
        if (code === GrpcCode.FailedPrecondition && attempts <= MAX_RETRIES) {
          this.retries.set(task, attempts);
          this.queue.add(task);
        } else {
          this.retries.delete(task);
          this.fail(task, e);
        }
      }
    }
    if (this.queue.size > 0 && !this.stopped) this.scheduled = setImmediate(() => this.drain());
    else this.flushWaiters();
  }

  private onEvent(e: StoreEvent): void {
    const { namespace, type, id, labels } = e.resource.metadata;
    if (namespace === NS_DEFAULT && type === T.Link) this.enqueue(`link:${id}`);
    else if (namespace === NS_DEFAULT && type === T.Machine) {
      this.enqueue(`machine:${id}`);
      this.enqueue(`link:${id}`);
    } else if (namespace === NS_INFRA_PROVIDER && type === T.InfraMachine) {
      this.enqueue(`im:${id}`);
      this.enqueue(`link:${id}`);
    } else if (namespace === NS_INFRA_PROVIDER && type === T.MachineRequest) {
      this.enqueue(`mr:${id}`);
      const set = labels[LABEL_MACHINE_REQUEST_SET];
      if (set !== undefined) this.enqueue(`set:${set}`);
    } else if (namespace === NS_INFRA_PROVIDER && type === T.MachineRequestStatus) this.enqueue(`mrs:${id}`);
    else if (namespace === NS_DEFAULT && (type === MACHINE_SET_NODE || type === CLUSTER_MACHINE)) {
      // MachineRequestStatusCleanupController waits on the MachineSetNode and ClusterMachine of a
      // status's machine: a change to one may let a status being torn down go.
      for (const mrs of this.store.viewKind(NS_INFRA_PROVIDER, T.MachineRequestStatus)) {
        if (mrs.metadata.phase === PHASE_TEARING_DOWN && mrs.metadata.finalizers.includes(C.MachineRequestStatusCleanup)) this.enqueue(`mrs:${mrs.metadata.id}`);
      }
    }
    else if (namespace === NS_INFRA_PROVIDER && type === T.ConfigPatchRequest) this.enqueue(`cpr:${id}`);
    else if (namespace === NS_DEFAULT && type === T.MachineRequestSet) this.enqueue(`set:${id}`);
    else if (namespace === NS_INFRA_PROVIDER && type === T.InfraProvider) {
      this.enqueue(`provider:${id}`);
      if (atLeast(this.v, '1.4')) {
        // handleInfraProviderDeletion in InfraMachineController and MachineRequestSetStatusController.
        for (const im of this.list(NS_INFRA_PROVIDER, T.InfraMachine, eqLabel(LABEL_INFRA_PROVIDER_ID, id))) this.enqueue(`im:${im.metadata.id}`);
        for (const s of this.list(NS_DEFAULT, T.MachineRequestSet)) this.enqueue(`set:${s.metadata.id}`);
      }
    }
    // A provider being deleted waits on what its cleanup tore down (runs on most events: only looks).
    if (e.eventType === EventType.DESTROYED || e.resource.metadata.phase === PHASE_TEARING_DOWN) {
      for (const p of this.store.viewKind(NS_INFRA_PROVIDER, T.InfraProvider)) {
        if (p.metadata.phase === PHASE_TEARING_DOWN && p.metadata.id !== id) this.enqueue(`provider:${p.metadata.id}`);
      }
    }
  }

  private run(task: string): void {
    const i = task.indexOf(':');
    const kind = task.slice(0, i);
    const id = task.slice(i + 1);
    switch (kind) {
      case 'link': return this.reconcileLink(id);
      case 'machine': return this.reconcileMachine(id);
      case 'im': return this.reconcileInfraMachine(id);
      case 'mr': return this.reconcileMachineRequest(id);
      case 'mrs': return this.reconcileMachineRequestStatus(id);
      case 'cpr': return this.reconcileConfigPatchRequest(id);
      case 'provider': return this.reconcileProvider(id);
      case 'set': return this.reconcileSet(id);
      default: return undefined;
    }
  }

  // -- store helpers (internal actor) -------------------------------------------------------------

  private peek(p: Pointer): Resource | undefined {
    return this.store.peek(p);
  }


  private list(ns: string, type: string, q = EMPTY_QUERY): Resource[] {
    return this.store.list(INTERNAL, ns, type, q);
  }

  /** Writes `change` of the current resource as its owner; no write when nothing changes. */
  private mutate(r: Resource, change: (n: Resource) => void): Resource {
    const next = cloneResource(r);
    change(next);
    const same = JSON.stringify([next.metadata.finalizers, next.metadata.labels, next.metadata.annotations, next.metadata.phase]) ===
      JSON.stringify([r.metadata.finalizers, r.metadata.labels, r.metadata.annotations, r.metadata.phase]) &&
      Buffer.from(next.spec.protoSpec).equals(Buffer.from(r.spec.protoSpec));
    return same ? r : this.store.update(INTERNAL, next, r.metadata.owner);
  }

  private removeFinalizers(r: Resource, drop: (f: string) => boolean): Resource {
    return this.mutate(r, (n) => {
      n.metadata.finalizers = n.metadata.finalizers.filter((f) => !drop(f));
    });
  }

  private addFinalizer(r: Resource, f: string): void {
    if (!this.addFinalizers || r.metadata.phase !== PHASE_RUNNING || r.metadata.finalizers.includes(f)) return;
    this.mutate(r, (n) => n.metadata.finalizers.push(f));
  }

  private teardown(r: Resource): Resource {
    return this.mutate(r, (n) => {
      n.metadata.phase = PHASE_TEARING_DOWN;
    });
  }

  /** Destroys it once torn down and free of finalizers; true when gone. */
  private destroyIfReady(r: Resource): boolean {
    if (r.metadata.phase !== PHASE_TEARING_DOWN || r.metadata.finalizers.length > 0) return false;
    this.store.destroy(INTERNAL, r.metadata, r.metadata.owner);
    return true;
  }

  /** Teardown + destroy as the resource's owner (Omni's cleanup helpers); true when gone. */
  private teardownAndDestroy(r: Resource | undefined): boolean {
    if (!r) return true;
    return this.destroyIfReady(this.teardown(r));
  }

  private providerActive(id: string): boolean {
    const p = this.peek(ptr(NS_INFRA_PROVIDER, T.InfraProvider, id));
    return p !== undefined && p.metadata.phase === PHASE_RUNNING;
  }

  /** The provider ID on a Link or Machine: an annotation up to 1.3, a label from 1.4. */
  private providerOf(r: Resource): string | undefined {
    return atLeast(this.v, '1.4') ? r.metadata.labels[LABEL_INFRA_PROVIDER_ID] : r.metadata.annotations[LABEL_INFRA_PROVIDER_ID];
  }

  private providerMark(providerId: string): Pick<Resource['metadata'], 'labels' | 'annotations'> {
    return atLeast(this.v, '1.4')
      ? { labels: { [LABEL_INFRA_PROVIDER_ID]: providerId }, annotations: {} }
      : { labels: {}, annotations: { [LABEL_INFRA_PROVIDER_ID]: providerId } };
  }

  // -- controllers ----------------------------------------------------------------------------

  /** MachineController, InfraMachineController, InfraMachineRegistrationController, LinkCleanupController, Destroy[Links]. */
  private reconcileLink(id: string): void {
    const link = this.peek(ptr(NS_DEFAULT, T.Link, id));
    const im = this.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachine, id));
    // InfraMachineController: the Link is going, so is its InfraMachine. (A Running InfraMachine with
    // no Link at all, as a hand-written scenario may have, is left alone.)
    if (im && (link ? link.metadata.phase === PHASE_TEARING_DOWN : im.metadata.phase === PHASE_TEARING_DOWN)) this.releaseInfraMachine(im);
    if (!link) return;
    if (link.metadata.phase === PHASE_RUNNING) {
      // 1.4+: InfraMachineController holds the Link of a static provider's machine.
      if (atLeast(this.v, '1.4') && im && this.providerOf(link) !== undefined) this.addFinalizer(link, C.InfraMachine);
      return;
    }
    const machine = this.peek(ptr(NS_DEFAULT, T.Machine, id));
    if (machine) this.reconcileMachine(id, machine);
    const registration = this.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachineRegistration, id));
    if (registration) this.store.destroy(INTERNAL, registration.metadata, registration.metadata.owner);
    const machineGone = !this.peek(ptr(NS_DEFAULT, T.Machine, id));
    const imGone = !this.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachine, id));
    const current = this.peek(link.metadata);
    if (!current) return;
    const after = this.removeFinalizers(current, (f) =>
      f === C.InfraMachineRegistration || f === C.LinkCleanup || (f === C.Machine && machineGone) || (f === C.InfraMachine && imGone));
    if (after.metadata.owner === '') this.destroyIfReady(after);
  }

  /** The Link's InfraMachine goes: torn down, (1.4+) stripped when its provider is gone, destroyed when free. */
  private releaseInfraMachine(im: Resource): void {
    let cur = this.teardown(im);
    const providerId = cur.metadata.labels[LABEL_INFRA_PROVIDER_ID];
    if (atLeast(this.v, '1.4') && cur.metadata.finalizers.length > 0 && (providerId === undefined || !this.providerActive(providerId))) {
      cur = this.removeFinalizers(cur, () => true);
    }
    this.destroyIfReady(cur);
  }

  /** omni.Machine: torn down with its Link, Omni's own finalizers released, destroyed by MachineController. */
  private reconcileMachine(id: string, known?: Resource): void {
    const m = known ?? this.peek(ptr(NS_DEFAULT, T.Machine, id));
    if (!m) return;
    const link = this.peek(ptr(NS_DEFAULT, T.Link, id));
    let cur = m;
    if (cur.metadata.phase === PHASE_RUNNING) {
      // Torn down with its Link; a Machine without a Link (hand-written scenarios) is left alone.
      if (!link || link.metadata.phase === PHASE_RUNNING) return;
      cur = this.teardown(cur);
    }
    cur = this.removeFinalizers(cur, (f) => MACHINE_FINALIZERS.has(f));
    this.destroyIfReady(cur);
  }

  /** InfraMachineController: a torn-down InfraMachine is destroyed once its finalizers are gone. */
  private reconcileInfraMachine(id: string): void {
    const im = this.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachine, id));
    if (!im || im.metadata.phase !== PHASE_TEARING_DOWN) return;
    const link = this.peek(ptr(NS_DEFAULT, T.Link, id));
    if (!link || link.metadata.phase === PHASE_TEARING_DOWN) this.releaseInfraMachine(im);
    else this.destroyIfReady(im);
  }

  /**
   * MachineRequestSetStatusController and ClusterMachineRequestStatusController on a torn-down
   * request. The latter (cluster_machine_request_status.go, a qtransform with
   * WithIgnoreTeardownUntil) treats the request as running while any other finalizer is on it (before
   * 1.4: other than ClusterMachineEncryptionKeyController); then it destroys its own
   * ClusterMachineRequestStatus, which no controller holds, and lets go at once.
   */
  private reconcileMachineRequest(id: string): void {
    const mr = this.peek(ptr(NS_INFRA_PROVIDER, T.MachineRequest, id));
    if (!mr) return;
    if (mr.metadata.phase === PHASE_RUNNING) {
      // A qtransform adds its finalizer to every running input, before its transform runs.
      this.addFinalizer(mr, C.ClusterMachineRequestStatus);
      return;
    }
    let cur = this.removeFinalizers(mr, (f) => f === C.MachineRequestSetStatus);
    const ignored = new Set<string>([C.ClusterMachineRequestStatus, ...(atLeast(this.v, '1.4') ? [] : [CLUSTER_MACHINE_ENCRYPTION_KEY])]);
    if (cur.metadata.finalizers.every((f) => ignored.has(f))) cur = this.removeFinalizers(cur, (f) => f === C.ClusterMachineRequestStatus);
    const inSet = cur.metadata.labels[LABEL_MACHINE_REQUEST_SET] !== undefined;
    // A standalone request (1.7+, owner "") is destroyed by whoever tore it down (TeardownAndDestroy).
    if (!inSet && cur.metadata.owner === '') return;
    this.destroyIfReady(cur);
  }

  /**
   * MachineRequestStatusCleanupController (machine_request_cleanup.go, 1.3.4 and 1.9.3): once the
   * status is torn down, a MachineSetNode of its machine is waited for while a controller owns it
   * and torn down and destroyed when a user does; then it waits while the machine's ClusterMachine
   * exists; then it tears down the machine's Link and lets go. Nothing of it: it lets go at once.
   */
  private reconcileMachineRequestStatus(id: string): void {
    const mrs = this.peek(ptr(NS_INFRA_PROVIDER, T.MachineRequestStatus, id));
    if (!mrs) return;
    if (mrs.metadata.phase === PHASE_RUNNING) {
      this.addFinalizer(mrs, C.MachineRequestStatusCleanup);
      return;
    }
    if (!mrs.metadata.finalizers.includes(C.MachineRequestStatusCleanup)) return;
    let uuid = '';
    try {
      uuid = decodeSpec(MachineRequestStatusSpec, mrs.spec.protoSpec).value.id;
    } catch {
      // An undecodable status names no machine.
    }
    if (uuid !== '') {
      const node = this.peek(ptr(NS_DEFAULT, MACHINE_SET_NODE, uuid));
      if (node && (node.metadata.owner !== '' || !this.teardownAndDestroy(node))) return;
      if (this.peek(ptr(NS_DEFAULT, CLUSTER_MACHINE, uuid))) return;
      const link = this.peek(ptr(NS_DEFAULT, T.Link, uuid));
      if (link) this.teardown(link);
    }
    const cur = this.peek(mrs.metadata);
    if (cur) this.removeFinalizers(cur, (f) => f === C.MachineRequestStatusCleanup);
  }

  /** ConfigPatchRequestController: its finalizer clears once the request is torn down (its ConfigPatch goes with it). */
  private reconcileConfigPatchRequest(id: string): void {
    const cpr = this.peek(ptr(NS_INFRA_PROVIDER, T.ConfigPatchRequest, id));
    if (!cpr) return;
    if (cpr.metadata.phase === PHASE_RUNNING) {
      this.addFinalizer(cpr, C.ConfigPatchRequest);
      return;
    }
    const patch = this.peek(ptr(NS_DEFAULT, 'ConfigPatches.omni.sidero.dev', id));
    if (patch && !this.teardownAndDestroy(patch)) return;
    this.removeFinalizers(cpr, (f) => f === C.ConfigPatchRequest);
  }

  /** InfraProviderCleanupController, ProviderJoinConfigController, InfraProviderStatusController, Destroy[InfraProviders]. */
  private reconcileProvider(id: string): void {
    if (!atLeast(this.v, '0.50')) return;
    const p = this.peek(ptr(NS_INFRA_PROVIDER, T.InfraProvider, id));
    if (!p) return;
    if (p.metadata.phase === PHASE_RUNNING) {
      this.addFinalizer(p, C.InfraProviderCleanup);
      return;
    }
    let cur = p;
    if (cur.metadata.finalizers.includes(C.InfraProviderCleanup) && this.cleanupProvider(id)) {
      cur = this.removeFinalizers(cur, (f) => f === C.InfraProviderCleanup);
    }
    if (cur.metadata.finalizers.includes(C.ProviderJoinConfig) && this.teardownAndDestroy(this.peek(ptr(NS_INFRA_PROVIDER, T.ProviderJoinConfig, id)))) {
      cur = this.removeFinalizers(this.peek(cur.metadata) ?? cur, (f) => f === C.ProviderJoinConfig);
    }
    if (cur.metadata.finalizers.includes(C.InfraProviderStatus) && this.teardownAndDestroy(this.peek(ptr(NS_EPHEMERAL, T.InfraProviderCombinedStatus, id)))) {
      cur = this.removeFinalizers(this.peek(cur.metadata) ?? cur, (f) => f === C.InfraProviderStatus);
    }
    if (cur.metadata.owner === '') this.destroyIfReady(cur);
  }

  /** The cleanup handlers in order; false when one has to wait (the chain stops there). */
  private cleanupProvider(id: string): boolean {
    const ownerless = (r: Resource | undefined) => (r && r.metadata.owner === '' ? r : undefined);
    if (!this.teardownAndDestroy(ownerless(this.peek(ptr(NS_INFRA_PROVIDER, T.InfraProviderStatus, id))))) return false;
    if (!this.teardownAndDestroy(ownerless(this.peek(ptr(NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, id))))) return false;
    this.opts.onServiceAccountDeleted?.(id);
    if (!atLeast(this.v, '1.4')) return true;
    const labelled = eqLabel(LABEL_INFRA_PROVIDER_ID, id);
    for (const link of this.list(NS_DEFAULT, T.Link, labelled)) this.teardown(link);
    let done = true;
    for (const ims of this.list(NS_INFRA_PROVIDER, T.InfraMachineStatus, labelled)) done = this.teardownAndDestroy(ims) && done;
    if (!done) return false;
    for (const mrs of this.list(NS_INFRA_PROVIDER, T.MachineRequestStatus, labelled)) done = this.teardownAndDestroy(mrs) && done;
    if (!done) return false;
    // Every user-owned set, whatever provider it uses (docs/omni-lifecycle.md 7.3, handler 6).
    for (const set of this.list(NS_DEFAULT, T.MachineRequestSet)) {
      if (set.metadata.owner === '') done = this.teardownAndDestroy(set) && done;
    }
    return done;
  }

  /** MachineRequestSetStatusController: scale down, (1.7+) replace, tear down with the set. */
  private reconcileSet(id: string): void {
    const set = this.peek(ptr(NS_DEFAULT, T.MachineRequestSet, id));
    if (!set) return;
    const requests = this.list(NS_INFRA_PROVIDER, T.MachineRequest, eqLabel(LABEL_MACHINE_REQUEST_SET, id));
    let spec: MachineRequestSetSpec | undefined;
    try {
      spec = decodeSpec(MachineRequestSetSpec, set.spec.protoSpec).value;
    } catch {
      spec = undefined;
    }
    if (set.metadata.phase === PHASE_TEARING_DOWN) {
      const providerId = spec?.provider_id || requests[0]?.metadata.labels[LABEL_INFRA_PROVIDER_ID];
      const strip = atLeast(this.v, '1.4') && (providerId === undefined || !this.providerActive(providerId));
      for (const r of requests) {
        const torn = this.teardown(r);
        if (strip) this.removeFinalizers(torn, (f) => f !== C.ClusterMachineRequestStatus);
      }
      if (requests.length === 0 || requests.every((r) => !this.peek(r.metadata))) {
        const cur = this.peek(set.metadata);
        if (cur) {
          const after = this.removeFinalizers(cur, (f) => f === C.MachineRequestSetStatus);
          if (after.metadata.owner === '') this.destroyIfReady(after);
        }
      }
      return;
    }
    if (!spec) return;
    const running = requests.filter((r) => r.metadata.phase === PHASE_RUNNING).sort((a, b) => (a.metadata.id < b.metadata.id ? -1 : 1));
    for (const extra of running.slice(Math.max(0, spec.machine_count))) this.teardown(extra);
    if (atLeast(this.v, '1.7')) {
      for (let n = requests.length; n < spec.machine_count; n++) this.newRequest({ providerId: spec.provider_id, set: id, ...(spec.talos_version ? { talosVersion: spec.talos_version } : {}) });
    }
  }

  private newRequest(o: MachineRequestOptions): Resource {
    const id = o.id ?? (o.set !== undefined ? `${o.set}-${this.suffix()}` : undefined);
    if (id === undefined) throw new Error('a MachineRequest outside a set needs an id');
    const labels: Record<string, string> = { [LABEL_INFRA_PROVIDER_ID]: o.providerId };
    if (o.set !== undefined) labels[LABEL_MACHINE_REQUEST_SET] = o.set;
    const owner = atLeast(this.v, '1.7') || o.set === undefined ? '' : C.MachineRequestSetStatus;
    const spec = encodeSpec(MachineRequestSpec, { ...REQUEST_DEFAULTS, talos_version: o.talosVersion ?? '' });
    return this.store.create(INTERNAL, { metadata: newMetadata(ptr(NS_INFRA_PROVIDER, T.MachineRequest, id), { owner, labels }), spec: { protoSpec: spec } }, owner);
  }

  // -- helpers for scenarios, tests and the demo ------------------------------------------------

  deleteMachine(uuid: string): void {
    const link = this.store.get(INTERNAL, ptr(NS_DEFAULT, T.Link, uuid));
    this.teardown(link);
  }

  scaleDown(set: string, count: number): void {
    const s = this.store.get(INTERNAL, ptr(NS_DEFAULT, T.MachineRequestSet, set));
    this.mutate(s, (n) => {
      n.spec.protoSpec = updateSpec(MachineRequestSetSpec, n.spec.protoSpec, { machine_count: count });
    });
  }

  registerStaticMachine(providerId: string, uuid: string, opts: StaticMachineOptions = {}): { link: Resource; infraMachine: Resource; machine?: Resource } {
    if (atLeast(this.v, '1.4') && !this.providerActive(providerId)) {
      // establishLink (1.4+) refuses machines of a provider that is gone or being deleted.
      throw errorFromStatus(GrpcCode.NotFound, "the infra provider is being deleted or doesn't exist");
    }
    const mark = this.providerMark(providerId);
    const providerLabel = { [LABEL_INFRA_PROVIDER_ID]: providerId };
    const link = this.store.create(INTERNAL, { metadata: newMetadata(ptr(NS_DEFAULT, T.Link, uuid), mark), spec: { protoSpec: new Uint8Array() } }, '');
    if (atLeast(this.v, '0.52')) {
      this.store.create(INTERNAL, {
        metadata: newMetadata(ptr(NS_INFRA_PROVIDER, T.InfraMachineRegistration, uuid), { owner: C.InfraMachineRegistration, labels: providerLabel }),
        spec: { protoSpec: new Uint8Array() },
      }, C.InfraMachineRegistration);
    }
    const infraMachine = this.store.create(INTERNAL, {
      metadata: newMetadata(ptr(NS_INFRA_PROVIDER, T.InfraMachine, uuid), { owner: C.InfraMachine, labels: providerLabel }),
      spec: { protoSpec: new Uint8Array() },
    }, C.InfraMachine);
    if (!opts.accepted) return { link, infraMachine };
    const machine = this.store.create(INTERNAL, { metadata: newMetadata(ptr(NS_DEFAULT, T.Machine, uuid), { owner: C.Machine, ...mark }), spec: { protoSpec: new Uint8Array() } }, C.Machine);
    return { link, infraMachine, machine };
  }

  createMachineRequest(opts: MachineRequestOptions): Resource {
    return this.newRequest(opts);
  }

  createMachineRequestSet(opts: MachineRequestSetOptions): { set: Resource; requests: Resource[] } {
    const spec = encodeSpec(MachineRequestSetSpec, {
      ...REQUEST_DEFAULTS, provider_id: opts.providerId, machine_count: opts.machineCount, talos_version: opts.talosVersion ?? '',
    });
    const set = this.store.create(INTERNAL, { metadata: newMetadata(ptr(NS_DEFAULT, T.MachineRequestSet, opts.id)), spec: { protoSpec: spec } }, '');
    const requests: Resource[] = [];
    for (let i = 0; i < opts.machineCount; i++) {
      requests.push(this.newRequest({ providerId: opts.providerId, set: opts.id, ...(opts.talosVersion ? { talosVersion: opts.talosVersion } : {}) }));
    }
    return { set, requests };
  }
}
