// What the finalizers the stub leaves alone mean, whether Omni will keep holding a resource once
// ours are gone, and what an operator can do about it (docs/omni-lifecycle.md 3.2, 4, 7.3 and docs/omni-behaviour.md;
// docs/omni-behaviour.md "What Omni's controllers wait for"). Used by plan notes and the report.
//
// A prediction rests only on what the provider's account can read (InfraProvider ranks below
// Reader: its own resources in `infra-provider`, and `omni.Machine`). What Omni waits for and the
// provider cannot read (MachineSetNodes, ClusterMachines, ConfigPatches, MachineRequestSets, ...)
// is never predicted as a wait: it is said to be unseen, with what decides it.

import { isOurFinalizer } from '../ownership.js';

/**
 * `waits`: what makes Omni hold it is in what was read, and nobody releases it in this run.
 * `lets-go`: what Omni's controller waits for is absent from what was read: it lets go by itself.
 * `unseen`: what decides it cannot be read with the provider's account.
 */
export type Prediction = 'waits' | 'lets-go' | 'unseen';

/** Whether the machine a status names is among the `omni.Machine`s the snapshot read. */
export type MachinePresence = 'present' | 'absent' | 'unreadable';

/** What the snapshot shows that decides whether Omni's controllers keep holding a resource. */
export interface HoldFacts {
  providerId: string;
  /** Every finalizer on the resource once ours are removed (Omni's own and anyone else's). */
  remaining: readonly string[];
  /** The machine UUID, for next steps (`<uuid>`). */
  uuid?: string;
  /** A MachineRequestStatus: the machine its spec names ('' when none). */
  statusMachine?: string;
  /** A MachineRequestStatus naming a machine: whether that `omni.Machine` was read. */
  machine?: MachinePresence;
}

export interface Hold {
  finalizer: string;
  owner: 'omni' | 'other-provider' | 'unknown';
  prediction: Prediction;
  /** What it waits for, as far as the provider can tell, as a sentence. */
  why: string;
  nextStep: string;
}

const NOTHING_TO_DO = 'nothing to do: Omni lets go by itself';

/** Omni's controllers whose hold the stub cannot see (what they wait for needs the Reader role or more). */
const UNSEEN: Readonly<Record<string, { waitsFor: string; nextStep: string }>> = {
  InfraMachineController: {
    waitsFor:
      "holds it until the InfraMachine is destroyed and, for an allocated machine, the ClusterMachine's config is " +
      'torn down',
    nextStep: 'take the machine out of its cluster, then delete it (omnictl delete link <uuid>)',
  },
  MachineRequestSetStatusController: {
    waitsFor: 'holds it until its MachineRequestSet has scaled down past it',
    nextStep: 'scale down or delete the MachineRequestSet',
  },
  BMCConfigController: {
    waitsFor: "holds it until the user's InfraMachineBMCConfig is gone",
    nextStep: 'delete the InfraMachineBMCConfig of the machine, or the machine itself',
  },
  MachineCleanupController: {
    waitsFor:
      "holds it until the machine's MachineSetNode, InfraMachineConfig, InfraMachineBMCConfig, KernelArgs and " +
      'install-disk config are gone',
    nextStep: 'remove the machine from its cluster',
  },
  LinkCleanupController: {
    waitsFor: "holds it until the Link's join-token usage, node unique token and labels are cleaned",
    nextStep: 'wait for Omni; nothing to do by hand',
  },
  MachineController: {
    waitsFor: 'holds it until the Machine is destroyed',
    nextStep: 'delete the machine (omnictl delete link <uuid>)',
  },
};

const CANNOT_READ =
  "this provider's account cannot read that (it needs the Reader role), so whether Omni waits cannot be seen from here";

/** Omni's hold of a finalizer: what it is predicted to do, why, and the operator's next step. */
type OmniHold = (prediction: Prediction, why: string, nextStep: string) => Hold;

/** What one finalizer that is not ours holds the resource for, from `f`. */
export function predictHold(finalizer: string, f: HoldFacts): Hold {
  const omni = omniHold(finalizer, f);
  switch (finalizer) {
    case 'ClusterMachineRequestStatusController':
      return clusterMachineRequestStatusHold(f, omni);
    case 'MachineRequestStatusCleanupController':
      return cleanupHold(f, omni);
    case 'ConfigPatchRequestController':
      // docs/omni-behaviour.md 'What Omni's own controllers wait for': a qtransform to the ConfigPatch of the
      // same ID; nothing puts a finalizer on ConfigPatches, so the teardown destroys it at once and the
      // finalizer goes.
      return omni(
        'lets-go',
        'lets go by itself once it has destroyed the ConfigPatch it made, which nothing else holds',
        NOTHING_TO_DO,
      );
    case 'MachineStatusController':
      // Before Omni 1.3.0 it held every InfraMachineStatus as an extra input and let go on teardown.
      return omni(
        'lets-go',
        'lets go by itself once it reconciles the teardown (Omni before 1.3.0 held every InfraMachineStatus as an ' +
          'extra input)',
        'if it stays: make sure Omni is healthy; upgrading Omni to 1.3 or later drops this finalizer by a migration',
      );
    default:
      break;
  }
  // Own keys only: a finalizer named like an Object.prototype member (`constructor`) is not one of these.
  const known = Object.hasOwn(UNSEEN, finalizer) ? UNSEEN[finalizer] : undefined;
  if (known) return omni('unseen', `${known.waitsFor}; ${CANNOT_READ}`, known.nextStep);
  return unlistedHold(finalizer, f, omni);
}

/** The hold of Omni's `finalizer`, its next step's `<uuid>` filled in from `f`. */
function omniHold(finalizer: string, f: HoldFacts): OmniHold {
  const fill = (s: string) => (f.uuid ? s.replaceAll('<uuid>', f.uuid) : s);
  return (prediction, why, nextStep) => ({
    finalizer,
    owner: 'omni',
    prediction,
    why: `Omni's ${finalizer} ${why}`,
    nextStep: fill(nextStep),
  });
}

/** ClusterMachineRequestStatusController: it waits for the other finalizers on the request, then lets go. */
function clusterMachineRequestStatusHold(f: HoldFacts, omni: OmniHold): Hold {
  // docs/omni-behaviour.md 'What Omni's own controllers wait for' (1.3.4, 1.9.3): a qtransform with
  // WithIgnoreTeardownUntil, so it treats the request as running while any other finalizer is on it; then
  // it destroys its own output, the ClusterMachineRequestStatus, which no controller holds, and lets go.
  // (Before 1.4 ClusterMachineEncryptionKeyController is also ignored, a finalizer of ClusterMachines
  // only.)
  const finalizer = 'ClusterMachineRequestStatusController';
  const others = f.remaining.filter((x) => x !== finalizer);
  if (others.length === 0)
    return omni(
      'lets-go',
      'lets go as soon as no other finalizer is on the request: it then destroys its own ' +
        'ClusterMachineRequestStatus, which nothing else holds',
      NOTHING_TO_DO,
    );
  return omni(
    'waits',
    `holds it until ${others.join(', ')} ${others.length > 1 ? 'are' : 'is'} gone, then lets go`,
    nextStepsOf(others.map((o) => predictHold(o, { ...f, remaining: others }))),
  );
}

/** MachineRequestStatusCleanupController: it waits while the status's machine is in a cluster. */
function cleanupHold(f: HoldFacts, omni: OmniHold): Hold {
  // docs/omni-behaviour.md 'What Omni's own controllers wait for': on teardown it waits while a
  // controller-owned MachineSetNode of the status's machine exists (a user-owned one it destroys itself)
  // and while that machine's ClusterMachine exists, then tears the machine's Link down and lets go. Omni
  // takes such a machine out of its cluster by itself (it drops the MachineSetNodes of machines whose
  // request is tearing down), so it waits only as long as leaving the cluster takes.
  const m = f.statusMachine;
  if (m === '')
    return omni(
      'lets-go',
      'lets go by itself: the status names no machine, so there is no MachineSetNode or ClusterMachine to wait for',
      NOTHING_TO_DO,
    );
  if (m !== undefined && f.machine === 'absent') {
    return omni(
      'lets-go',
      `lets go by itself: it waits only while machine ${m} has a MachineSetNode or a ClusterMachine, and no ` +
        `Machine ${m} of this provider is left in Omni`,
      NOTHING_TO_DO,
    );
  }
  const which = m === undefined ? 'the machine the status names' : `machine ${m}`;
  const seen =
    f.machine === 'unreadable'
      ? `whether ${which} is still in Omni could not be read either`
      : `${which} is still in Omni`;
  return omni(
    'unseen',
    `waits while ${which} is in a cluster (a MachineSetNode or ClusterMachine of it), which Omni takes it out of ` +
      `by itself now that its request is being deleted (a Talos reset can take minutes), then tears its Link ` +
      `down; ${seen}, and ${CANNOT_READ}`,
    `wait, or run again with --wait; to check, as an Omni user: omnictl get machinesetnodes,clustermachines ` +
      `${m ?? '<uuid>'}; if the machine stays in its cluster, look at that cluster's health in Omni`,
  );
}

/** A finalizer of no controller known above: ours on what is not ours, an unknown one of Omni's, another provider's. */
function unlistedHold(finalizer: string, f: HoldFacts, omni: OmniHold): Hold {
  if (isOurFinalizer(finalizer, f.providerId)) {
    return {
      finalizer,
      owner: 'unknown',
      prediction: 'waits',
      why: 'our own finalizer on a resource that is not ours, never removed by this run',
      nextStep: "check the resource's infra-provider-id label with an admin",
    };
  }
  if (!finalizer.includes('.')) {
    return omni(
      'unseen',
      'lets go once its own work on the resource is done; what it waits for is not known to stub-provider',
      'wait for Omni, or check its logs for this controller',
    );
  }
  return {
    finalizer,
    owner: 'other-provider',
    prediction: 'waits',
    why:
      `${finalizer} belongs to another provider (IDs are compared exactly, case included) and is never removed by ` +
      `this run`,
    nextStep: "run stub-provider with that provider's own ID and key if it is gone too",
  };
}

/** One hold per finalizer of `f.remaining`. */
export function predictHolds(f: HoldFacts): Hold[] {
  return f.remaining.map((x) => predictHold(x, f));
}

/**
 * What still holds a resource after a wait for it: a finalizer predicted to let go by itself that did
 * not is said so (and is a wait now), instead of being predicted to let go again.
 */
export function stillHolding(holds: readonly Hold[]): Hold[] {
  return holds.map((h) =>
    h.prediction !== 'lets-go'
      ? h
      : {
          ...h,
          prediction: 'waits' as const,
          why: `had not let go as expected: ${h.why}`,
          nextStep: 'check that Omni is healthy (its logs name this controller), then run again',
        },
  );
}

/** The prediction for the resource: it waits if one hold waits, is unseen if one is, else lets go. */
export function predictionOf(holds: readonly Hold[]): Prediction {
  if (holds.some((h) => h.prediction === 'waits')) return 'waits';
  return holds.some((h) => h.prediction === 'unseen') ? 'unseen' : 'lets-go';
}

/** One line: "<finalizer>: <why>; <finalizer>: <why>". */
export function describeHolds(holds: readonly Hold[]): string {
  return holds.map((h) => `${h.finalizer}: ${h.why}`).join('; ');
}

export function nextStepsOf(holds: readonly Hold[]): string {
  return [...new Set(holds.map((h) => h.nextStep))].join('; ');
}

/** `250 ms`, `5 s`, `1.5 s`, `2 min`: how long something was waited for, in a sentence. */
export function describeDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Number((ms / 1000).toFixed(1))} s`;
  return `${Number((ms / 60_000).toFixed(1))} min`;
}
