// src/omni-sim/controllers: what Omni does by itself, as its controllers: their face (this file), the
// scheduler (queue.ts), the internal actor (actor.ts), and one file a resource family (machines.ts,
// requests.ts, provider.ts).
//
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
//              teardown once what each waits for in Omni is gone (docs/omni-behaviour.md 'What Omni's own
//              controllers wait for', v1.3.4 and v1.9.3).
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
//
// This file is the face of the controllers: their options, start-up and which store event queues
// which task. The rest is by concept: queue.ts (the scheduler and ControllerError),
// actor.ts (Omni's controller names and the internal actor's writes), and one file a
// resource family: machines.ts, requests.ts, provider.ts.

import { randomBytes } from 'node:crypto';
import type { Resource } from '../../omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_MACHINE_REQUEST_SET,
  NS_DEFAULT,
  NS_INFRA_PROVIDER,
  PHASE_TEARING_DOWN,
  T,
} from '../../omni-api/resource.js';
import { EventType } from '../../omni-api/wire.js';
import type { SimClock } from '../api.js';
import { C, type ControllerStore, eqLabel, OmniActor } from './actor.js';
import {
  deleteMachine,
  reconcileInfraMachine,
  reconcileLink,
  reconcileMachine,
  registerStaticMachine,
  type StaticMachineOptions,
} from './machines.js';
import { reconcileConfigPatchRequest, reconcileProvider } from './provider.js';
import { type ControllerError, TaskQueue } from './queue.js';
import {
  CLUSTER_MACHINE,
  createMachineRequestSet,
  MACHINE_SET_NODE,
  type MachineRequestOptions,
  type MachineRequestSetOptions,
  newRequest,
  reconcileMachineRequest,
  reconcileMachineRequestStatus,
  reconcileSet,
  scaleDown,
} from './requests.js';
import type { StoreEvent } from '../store/watch.js';
import type { OmniVersion } from '../version.js';
import { atLeast, parseVersion } from '../version.js';

// The module's exports as they were before the split, so that no importer has to change.

export interface OmniControllerOptions {
  version: OmniVersion | string;
  clock?: SimClock;
  /**
   * InfraProviderCleanupController deleted the account `infra-provider:<id>` (wire to IdentityRegistry.removeProvider).
   */
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

export interface OmniControllers {
  stop(): void;
  /**
   * Resolves once every queued reconcile has run (for tests and the demo); rejects with the first
   * failure when a controller has failed: a sim that stopped reconciling is not idle, it is broken.
   */
  idle(): Promise<void>;
  /** The unexpected failures so far (the first MAX_FAILURES_KEPT of queue.ts). */
  readonly failures: readonly ControllerError[];
  /** The UI's "delete machine": tears down `Links/<uuid>`. */
  deleteMachine(uuid: string): void;
  /** Sets the MachineRequestSet's machine_count to `count`; the extra requests are torn down. */
  scaleDown(set: string, count: number): void;
  /**
   * A static provider's machine connects: Link, MachineRegistration and a pending InfraMachine. Refused on 1.4+ for a
   * provider that is gone or tearing down.
   */
  registerStaticMachine(
    providerId: string,
    uuid: string,
    opts?: StaticMachineOptions,
  ): { link: Resource; infraMachine: Resource; machine?: Resource };
  /** A MachineRequest as Omni creates it (owner "" from 1.7, MachineRequestSetStatusController before). */
  createMachineRequest(opts: MachineRequestOptions): Resource;
  /** A user-owned MachineRequestSet with its first `machineCount` requests. */
  createMachineRequestSet(opts: MachineRequestSetOptions): { set: Resource; requests: Resource[] };
}

const ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';

function defaultSuffix(): string {
  const b = randomBytes(6);
  return [...b].map((x) => ALNUM[x % ALNUM.length]).join('');
}

export function startOmniControllers(store: ControllerStore, opts: OmniControllerOptions): OmniControllers {
  return new Controllers(store, opts);
}

class Controllers implements OmniControllers {
  private readonly v: OmniVersion;
  private readonly actor: OmniActor;
  private readonly tasks: TaskQueue;
  private readonly unsubscribe: () => void;
  private readonly suffix: () => string;

  constructor(
    private readonly store: ControllerStore,
    private readonly opts: OmniControllerOptions,
  ) {
    this.v = typeof opts.version === 'string' ? parseVersion(opts.version) : opts.version;
    this.actor = new OmniActor(store, this.v, opts.addFinalizers ?? true);
    this.suffix = opts.randomSuffix ?? defaultSuffix;
    this.tasks = new TaskQueue((task) => this.run(task), opts.onError);
    this.unsubscribe = store.onEvent((e) => this.onEvent(e));
    // Omni reconciles everything it finds when it starts.
    for (const [ns, type, task] of [
      [NS_DEFAULT, T.Link, 'link'],
      [NS_DEFAULT, T.Machine, 'machine'],
      [NS_INFRA_PROVIDER, T.InfraMachine, 'im'],
      [NS_INFRA_PROVIDER, T.MachineRequest, 'mr'],
      [NS_INFRA_PROVIDER, T.MachineRequestStatus, 'mrs'],
      [NS_INFRA_PROVIDER, T.ConfigPatchRequest, 'cpr'],
      [NS_INFRA_PROVIDER, T.InfraProvider, 'provider'],
      [NS_DEFAULT, T.MachineRequestSet, 'set'],
    ] as const) {
      for (const r of this.actor.list(ns, type)) this.enqueue(`${task}:${r.metadata.id}`);
    }
  }

  get failures(): readonly ControllerError[] {
    return this.tasks.failures;
  }

  stop(): void {
    this.unsubscribe();
    this.tasks.stop();
  }

  idle(): Promise<void> {
    return this.tasks.idle();
  }

  private enqueue(task: string): void {
    this.tasks.enqueue(task);
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
        if (
          mrs.metadata.phase === PHASE_TEARING_DOWN &&
          mrs.metadata.finalizers.includes(C.MachineRequestStatusCleanup)
        )
          this.enqueue(`mrs:${mrs.metadata.id}`);
      }
    } else if (namespace === NS_INFRA_PROVIDER && type === T.ConfigPatchRequest) this.enqueue(`cpr:${id}`);
    else if (namespace === NS_DEFAULT && type === T.MachineRequestSet) this.enqueue(`set:${id}`);
    else if (namespace === NS_INFRA_PROVIDER && type === T.InfraProvider) {
      this.enqueue(`provider:${id}`);
      if (atLeast(this.v, '1.4')) {
        // handleInfraProviderDeletion in InfraMachineController and MachineRequestSetStatusController.
        for (const im of this.actor.list(NS_INFRA_PROVIDER, T.InfraMachine, eqLabel(LABEL_INFRA_PROVIDER_ID, id)))
          this.enqueue(`im:${im.metadata.id}`);
        for (const s of this.actor.list(NS_DEFAULT, T.MachineRequestSet)) this.enqueue(`set:${s.metadata.id}`);
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
    const a = this.actor;
    switch (kind) {
      case 'link':
        return reconcileLink(a, id);
      case 'machine':
        return reconcileMachine(a, id);
      case 'im':
        return reconcileInfraMachine(a, id);
      case 'mr':
        return reconcileMachineRequest(a, id);
      case 'mrs':
        return reconcileMachineRequestStatus(a, id);
      case 'cpr':
        return reconcileConfigPatchRequest(a, id);
      case 'provider':
        return reconcileProvider(a, id, this.opts.onServiceAccountDeleted);
      case 'set':
        return reconcileSet(a, id, this.suffix);
      default:
        return undefined;
    }
  }

  // -- helpers for scenarios, tests and the demo ------------------------------------------------

  deleteMachine(uuid: string): void {
    deleteMachine(this.actor, uuid);
  }

  scaleDown(set: string, count: number): void {
    scaleDown(this.actor, set, count);
  }

  registerStaticMachine(
    providerId: string,
    uuid: string,
    opts: StaticMachineOptions = {},
  ): { link: Resource; infraMachine: Resource; machine?: Resource } {
    return registerStaticMachine(this.actor, providerId, uuid, opts);
  }

  createMachineRequest(opts: MachineRequestOptions): Resource {
    return newRequest(this.actor, opts, this.suffix);
  }

  createMachineRequestSet(opts: MachineRequestSetOptions): { set: Resource; requests: Resource[] } {
    return createMachineRequestSet(this.actor, opts, this.suffix);
  }
}
