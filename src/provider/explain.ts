// What the finalizers the stub leaves alone mean, and what an operator can do about them
// (omni-lifecycle.md 2.2, 3.3, 5.1 and 8.1). Used by plan blockers and the report.

import { isOurFinalizer } from './ownership.js';

/** Omni's own controllers (names without a dot) and what each waits for before it lets go. */
export const OMNI_FINALIZERS: Readonly<Record<string, { waitsFor: string; nextStep: string }>> = {
  InfraMachineController: {
    waitsFor: "Omni's InfraMachineController holds it until the InfraMachine is destroyed and, for an allocated machine, the ClusterMachine's config is torn down",
    nextStep: 'take the machine out of its cluster, then delete it (omnictl delete link <uuid>)',
  },
  ClusterMachineRequestStatusController: {
    waitsFor: "Omni's ClusterMachineRequestStatusController holds it until the machine's ClusterMachineRequestStatus is gone, that is until the machine left its cluster",
    nextStep: 'scale the machine set down or remove the machine from its cluster',
  },
  MachineRequestSetStatusController: {
    waitsFor: "Omni's MachineRequestSetStatusController holds it until its MachineRequestSet has scaled down past it",
    nextStep: 'scale down or delete the MachineRequestSet',
  },
  MachineRequestStatusCleanupController: {
    waitsFor: "Omni's MachineRequestStatusCleanupController holds it until the MachineSetNode named by the status and its ClusterMachine are gone; then it tears the Link down",
    nextStep: 'remove the machine from its cluster (or scale the machine set down); Omni then lets go by itself',
  },
  ConfigPatchRequestController: {
    waitsFor: "Omni's ConfigPatchRequestController holds it until the ConfigPatch it produced is destroyed",
    nextStep: 'wait for Omni to delete the ConfigPatch; check it with omnictl get configpatches',
  },
  MachineStatusController: {
    waitsFor: "Omni's MachineStatusController (before Omni 1.3.0 it held every InfraMachineStatus as an extra input) lets go once it reconciles the teardown",
    nextStep: 'make sure Omni is healthy; upgrading Omni to 1.3 or later drops this finalizer by a migration',
  },
  BMCConfigController: {
    waitsFor: "Omni's BMCConfigController holds it until the user's InfraMachineBMCConfig is gone",
    nextStep: 'delete the InfraMachineBMCConfig of the machine, or the machine itself',
  },
  MachineCleanupController: {
    waitsFor: "Omni's MachineCleanupController holds it until the machine's MachineSetNode, InfraMachineConfig, InfraMachineBMCConfig, KernelArgs and install-disk config are gone",
    nextStep: 'remove the machine from its cluster',
  },
  LinkCleanupController: {
    waitsFor: "Omni's LinkCleanupController holds it until the Link's join-token usage, node unique token and labels are cleaned",
    nextStep: 'wait for Omni; nothing to do by hand',
  },
  MachineController: {
    waitsFor: "Omni's MachineController holds it until the Machine is destroyed",
    nextStep: 'delete the machine (omnictl delete link <uuid>)',
  },
};

export interface FinalizerExplanation {
  finalizer: string;
  owner: 'omni' | 'other-provider' | 'unknown';
  waitsFor: string;
  nextStep: string;
}

/** Explains a finalizer that is not ours. `uuid` fills the `<uuid>` of the next step when known. */
export function explainFinalizer(finalizer: string, providerId: string, uuid?: string): FinalizerExplanation {
  const fill = (s: string) => (uuid ? s.replaceAll('<uuid>', uuid) : s);
  const known = OMNI_FINALIZERS[finalizer];
  if (known) return { finalizer, owner: 'omni', waitsFor: known.waitsFor, nextStep: fill(known.nextStep) };
  if (isOurFinalizer(finalizer, providerId)) {
    return { finalizer, owner: 'unknown', waitsFor: 'our own finalizer on a resource that is not ours', nextStep: 'check the resource\'s infra-provider-id label with an admin' };
  }
  if (!finalizer.includes('.')) {
    return { finalizer, owner: 'omni', waitsFor: `Omni's ${finalizer} lets go once its own work on the resource is done`, nextStep: 'wait for Omni, or check its logs for this controller' };
  }
  return {
    finalizer,
    owner: 'other-provider',
    waitsFor: `${finalizer} belongs to another provider (IDs are compared exactly, case included) and is never removed by this run`,
    nextStep: 'run stub-provider with that provider\'s own ID and key if it is gone too',
  };
}

/** One line: "<finalizer>: <waits for>". */
export function describeForeign(finalizers: string[], providerId: string, uuid?: string): string {
  return finalizers.map((f) => {
    const e = explainFinalizer(f, providerId, uuid);
    return `${f}: ${e.waitsFor}`;
  }).join('; ');
}

export function nextStepsFor(finalizers: string[], providerId: string, uuid?: string): string {
  return [...new Set(finalizers.map((f) => explainFinalizer(f, providerId, uuid).nextStep))].join('; ');
}
