// Omni's controllers of a machine's own resources, as the sim emulates them (controllers.ts): the
// Link, the omni.Machine, the InfraMachine and the InfraMachineRegistration of one machine UUID,
// and a static provider's machine connecting. The chain of a deletion is docs/omni-lifecycle.md 4.1;
// what changed by release (the 1.4 InfraMachineController finalizer on Links, the provider ID moving
// from annotation to label, registrations refused for a provider being deleted) is section 8 there.

import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Resource } from '../../omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  newMetadata,
  NS_DEFAULT,
  NS_INFRA_PROVIDER,
  PHASE_RUNNING,
  PHASE_TEARING_DOWN,
  T,
} from '../../omni-api/resource.js';
import { INTERNAL } from '../api.js';
import { C, type OmniActor, ptr } from './actor.js';
import { atLeast } from '../version.js';

/** Omni finalizers on a Machine whose controllers finish right away in the sim (no Talos to reset). */
const MACHINE_FINALIZERS = new Set([
  'MachineStatusController',
  'MachineCleanupController',
  'MachineTeardownController',
  'MachineSetNodeController',
]);

export interface StaticMachineOptions {
  /** Also create the `omni.Machine`, as Omni does once the machine is accepted. Default false. */
  accepted?: boolean;
}

/**
 * MachineController, InfraMachineController, InfraMachineRegistrationController, LinkCleanupController, Destroy[Links].
 */
export function reconcileLink(a: OmniActor, id: string): void {
  const link = a.peek(ptr(NS_DEFAULT, T.Link, id));
  const im = a.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachine, id));
  // InfraMachineController: the Link is going, so is its InfraMachine. (A Running InfraMachine with
  // no Link at all, as a hand-written scenario may have, is left alone.)
  if (im && (link ? link.metadata.phase === PHASE_TEARING_DOWN : im.metadata.phase === PHASE_TEARING_DOWN))
    releaseInfraMachine(a, im);
  if (!link) return;
  if (link.metadata.phase === PHASE_RUNNING) {
    // 1.4+: InfraMachineController holds the Link of a static provider's machine.
    if (atLeast(a.v, '1.4') && im && a.providerOf(link) !== undefined) a.addFinalizer(link, C.InfraMachine);
    return;
  }
  const machine = a.peek(ptr(NS_DEFAULT, T.Machine, id));
  if (machine) reconcileMachine(a, id, machine);
  const registration = a.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachineRegistration, id));
  if (registration) a.store.destroy(INTERNAL, registration.metadata, registration.metadata.owner);
  const machineGone = !a.peek(ptr(NS_DEFAULT, T.Machine, id));
  const imGone = !a.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachine, id));
  const current = a.peek(link.metadata);
  if (!current) return;
  const after = a.removeFinalizers(
    current,
    (f) =>
      f === C.InfraMachineRegistration ||
      f === C.LinkCleanup ||
      (f === C.Machine && machineGone) ||
      (f === C.InfraMachine && imGone),
  );
  if (after.metadata.owner === '') a.destroyIfReady(after);
}

/** The Link's InfraMachine goes: torn down, (1.4+) stripped when its provider is gone, destroyed when free. */
function releaseInfraMachine(a: OmniActor, im: Resource): void {
  let cur = a.teardown(im);
  const providerId = cur.metadata.labels[LABEL_INFRA_PROVIDER_ID];
  if (
    atLeast(a.v, '1.4') &&
    cur.metadata.finalizers.length > 0 &&
    (providerId === undefined || !a.providerActive(providerId))
  ) {
    cur = a.removeFinalizers(cur, () => true);
  }
  a.destroyIfReady(cur);
}

/** omni.Machine: torn down with its Link, Omni's own finalizers released, destroyed by MachineController. */
export function reconcileMachine(a: OmniActor, id: string, known?: Resource): void {
  const m = known ?? a.peek(ptr(NS_DEFAULT, T.Machine, id));
  if (!m) return;
  const link = a.peek(ptr(NS_DEFAULT, T.Link, id));
  let cur = m;
  if (cur.metadata.phase === PHASE_RUNNING) {
    // Torn down with its Link; a Machine without a Link (hand-written scenarios) is left alone.
    if (!link || link.metadata.phase === PHASE_RUNNING) return;
    cur = a.teardown(cur);
  }
  cur = a.removeFinalizers(cur, (f) => MACHINE_FINALIZERS.has(f));
  a.destroyIfReady(cur);
}

/** InfraMachineController: a torn-down InfraMachine is destroyed once its finalizers are gone. */
export function reconcileInfraMachine(a: OmniActor, id: string): void {
  const im = a.peek(ptr(NS_INFRA_PROVIDER, T.InfraMachine, id));
  if (!im || im.metadata.phase !== PHASE_TEARING_DOWN) return;
  const link = a.peek(ptr(NS_DEFAULT, T.Link, id));
  if (!link || link.metadata.phase === PHASE_TEARING_DOWN) releaseInfraMachine(a, im);
  else a.destroyIfReady(im);
}

/** The UI's "delete machine": tears down `Links/<uuid>`. */
export function deleteMachine(a: OmniActor, uuid: string): void {
  const link = a.store.get(INTERNAL, ptr(NS_DEFAULT, T.Link, uuid));
  a.teardown(link);
}

/** A static provider's machine connects: Link, MachineRegistration and a pending InfraMachine. */
export function registerStaticMachine(
  a: OmniActor,
  providerId: string,
  uuid: string,
  opts: StaticMachineOptions = {},
): { link: Resource; infraMachine: Resource; machine?: Resource } {
  if (atLeast(a.v, '1.4') && !a.providerActive(providerId)) {
    // establishLink (1.4+) refuses machines of a provider that is gone or being deleted.
    throw errorFromStatus(GrpcCode.NotFound, "the infra provider is being deleted or doesn't exist");
  }
  const mark = a.providerMark(providerId);
  const providerLabel = { [LABEL_INFRA_PROVIDER_ID]: providerId };
  const link = a.store.create(
    INTERNAL,
    { metadata: newMetadata(ptr(NS_DEFAULT, T.Link, uuid), mark), spec: { protoSpec: new Uint8Array() } },
    '',
  );
  if (atLeast(a.v, '0.52')) {
    a.store.create(
      INTERNAL,
      {
        metadata: newMetadata(ptr(NS_INFRA_PROVIDER, T.InfraMachineRegistration, uuid), {
          owner: C.InfraMachineRegistration,
          labels: providerLabel,
        }),
        spec: { protoSpec: new Uint8Array() },
      },
      C.InfraMachineRegistration,
    );
  }
  const infraMachine = a.store.create(
    INTERNAL,
    {
      metadata: newMetadata(ptr(NS_INFRA_PROVIDER, T.InfraMachine, uuid), {
        owner: C.InfraMachine,
        labels: providerLabel,
      }),
      spec: { protoSpec: new Uint8Array() },
    },
    C.InfraMachine,
  );
  if (!opts.accepted) return { link, infraMachine };
  const machine = a.store.create(
    INTERNAL,
    {
      metadata: newMetadata(ptr(NS_DEFAULT, T.Machine, uuid), { owner: C.Machine, ...mark }),
      spec: { protoSpec: new Uint8Array() },
    },
    C.Machine,
  );
  return { link, infraMachine, machine };
}
