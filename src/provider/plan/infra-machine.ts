// PURE: the item of one InfraMachine, and of a BMCConfig held by the legacy bare-metal finalizer
// alone. A running machine is only noted (in use, refused, never adopted); a machine being deleted
// gets its chain in the order of docs/design.md rule 5: the wipe first, while its BMC data is still
// there (rule 8), then the provider's per-machine resources, BMCConfiguration last, its
// InfraMachineStatus, and the release of the InfraMachine itself. Apart from planner.ts because it is
// what the stub knows of static providers' machines, and nothing of requests.

import type { Resource } from '../../omni-api/resource.js';
import { PHASE_RUNNING, PHASE_TEARING_DOWN, T, pointerOf, providerType } from '../../omni-api/resource.js';
import type { PlanDraft } from './draft.js';
import type { Operation, WipeOp } from './operations.js';
import { foreignFinalizers, ourFinalizers } from '../ownership.js';

/** What of one InfraMachine the snapshot holds, read once for its item. */
interface MachineParts {
  im: Resource;
  uuid: string;
  /** Our finalizers on the InfraMachine. */
  mine: readonly string[];
  /** Its resources in `infra-provider:<id>`, BMCConfiguration last (machineOutputs). */
  outputs: Resource[];
  /** Its legacy BMCConfig (bare-metal v0.4 and earlier), if any. */
  bmcConfig?: Resource;
}

export function planInfraMachine(d: PlanDraft, im: Resource): void {
  const uuid = im.metadata.id;
  if (!d.selected(uuid)) return;
  const mine = ourFinalizers(im.metadata, d.id);
  if (im.metadata.phase === PHASE_RUNNING) {
    machineInUse(d, uuid, mine.length > 0);
    return;
  }
  const bmcConfig = d.bmcById.get(uuid);
  const parts: MachineParts = { im, uuid, mine, outputs: machineOutputs(d, uuid), ...(bmcConfig ? { bmcConfig } : {}) };
  const ops = machineChain(d, parts);
  if (ops.some((op) => op.op !== 'wipe')) {
    d.items.push({
      kind: 'InfraMachine',
      id: uuid,
      reason: 'InfraMachine being deleted',
      ops: [...d.childrenGone(T.InfraMachine, uuid), ...ops],
    });
    return;
  }
  const foreign = foreignFinalizers(im.metadata, d.id);
  if (foreign.length > 0) d.heldByOthers('InfraMachine', im, foreign, uuid);
}

/** A running InfraMachine: in use (ours on it), refused (new since the provider left), or never adopted. */
function machineInUse(d: PlanDraft, uuid: string, adopted: boolean): void {
  if (adopted) {
    d.running.push({
      kind: 'InfraMachine',
      id: uuid,
      reason: 'in use: nobody asked to delete it, so it keeps its finalizers',
      nextStep: `if it should go: take it out of its cluster, then omnictl delete link ${uuid}, and run again`,
    });
  } else if (d.whole) {
    d.refusals.push({
      kind: 'InfraMachine',
      id: uuid,
      reason: 'registered after the provider left: it gets no finalizers and stays pending',
      done: true,
    });
  } else {
    d.running.push({
      kind: 'InfraMachine',
      id: uuid,
      reason: 'running and never adopted (no finalizers of ours)',
      nextStep: `delete it with omnictl delete link ${uuid} if it should go`,
    });
  }
}

/** A machine being deleted, in order: the wipe, a legacy BMCConfig, its outputs, its status, its release. */
function machineChain(d: PlanDraft, m: MachineParts): Operation[] {
  const { uuid, bmcConfig } = m;
  const ops: Operation[] = [];
  const wipe = wipeStep(d, m);
  if (wipe) ops.push(wipe);
  if (bmcConfig && bmcConfig.metadata.phase === PHASE_TEARING_DOWN) {
    const bm = ourFinalizers(bmcConfig.metadata, d.id);
    if (bm.length > 0)
      ops.push(d.release(bmcConfig, bm, 'legacy bare-metal (v0.4 and earlier) finalizer on a BMCConfig being deleted'));
  }
  for (const r of m.outputs) ops.push(...d.dispose(r, 'per-machine state of the provider', uuid));
  const ims = d.imsById.get(uuid);
  if (ims) ops.push(...d.dispose(ims, "the provider's InfraMachineStatus of a machine being deleted", uuid));
  if (m.mine.length > 0)
    ops.push(
      d.release(m.im, m.mine, 'the InfraMachine is being deleted; Omni destroys it once our finalizers are gone', uuid),
    );
  return ops;
}

/** The wipe (with `--wipe`, on a machine ours still hold), unless an earlier run cleaned up after its own. */
function wipeStep(d: PlanDraft, m: MachineParts): WipeOp | undefined {
  if (!d.o.wipe || m.mine.length === 0) return undefined;
  const { uuid, outputs, bmcConfig } = m;
  const bmcConfiguration = outputs.find((r) => r.metadata.type === providerType('BMCConfiguration', d.id));
  // The BMCConfiguration is destroyed last of the machine's namespace resources, and only after the
  // wipe (a failed required wipe stops the chain first). None of them left while our finalizers
  // still hold the InfraMachine: an earlier run got past the wipe and cleaned up, and a wipe without
  // the BMC data can no longer happen; planning it again would block --require-wipe for good.
  const cleanedEarlier = !bmcConfiguration && !bmcConfig && outputs.length === 0;
  if (cleanedEarlier) {
    d.leftBehind.push({
      kind: 'InfraMachine',
      id: uuid,
      reason: "wipe not repeated: the machine's BMC data was already cleaned up by an earlier run (after its wipe)",
      nextStep: "check the earlier run's report or the hardware if you need to know the wipe's result",
    });
    return undefined;
  }
  const claimOn = d.imsById.get(uuid) ?? outputs[0];
  return {
    op: 'wipe',
    machineId: uuid,
    ...(claimOn ? { claim: pointerOf(claimOn) } : {}),
    ...(bmcConfiguration ? { bmcConfiguration } : {}),
    ...(bmcConfig ? { bmcConfig } : {}),
  };
}

/** The machine's resources in `infra-provider:<id>`, BMCConfiguration last: a wipe or a retry may still need it. */
function machineOutputs(d: PlanDraft, uuid: string): Resource[] {
  const types = new Set(d.s.profile.machineTypes);
  const rs = (d.nsById.get(uuid) ?? []).filter((r) => types.has(r.metadata.type));
  const bmcType = providerType('BMCConfiguration', d.id);
  return [...rs.filter((r) => r.metadata.type !== bmcType), ...rs.filter((r) => r.metadata.type === bmcType)];
}

/** A BMCConfig being deleted whose InfraMachine is not (legacy bare-metal finalizers, docs/omni-lifecycle.md 3.1). */
export function planBmcConfig(d: PlanDraft, bmc: Resource): void {
  const uuid = bmc.metadata.id;
  const im = d.imById.get(uuid);
  if (im && im.metadata.phase === PHASE_TEARING_DOWN) return; // part of the machine's chain
  if (bmc.metadata.phase !== PHASE_TEARING_DOWN || !d.selected(uuid)) return;
  const mine = ourFinalizers(bmc.metadata, d.id);
  if (mine.length === 0) return;
  d.items.push({
    kind: 'BMCConfig',
    id: uuid,
    reason: 'BMCConfig being deleted, held by a legacy bare-metal finalizer',
    ops: [d.release(bmc, mine, "it blocks Omni's InfraMachineBMCConfig -> Machine -> Link chain")],
  });
}
