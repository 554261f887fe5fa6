// The naive baseline: what the Go infra-provider library's controllers do when they finish a
// deletion, one resource at a time and strictly sequentially. COSI's runtime removes a finalizer
// with a Get then an Update, once per finalizer, and a controller destroys its output with a Get
// then a Destroy; nothing is batched, nothing runs in parallel.

import type { Pointer, Resource } from '../src/omni-api/resource.js';
import { NS_INFRA_PROVIDER, providerNamespace, providerType, T } from '../src/omni-api/resource.js';
import type { State } from '../src/omni-api/state.js';
import { hasCode } from '../src/omni-client/errors.js';
import { BARE_METAL_FINALIZER_NAMES } from '../src/omni-sim/scenario/generate.js';

/** Output type of each bare-metal controller, in `infra-provider:<id>` unless it is the status. */
const OUTPUT_OF: Record<(typeof BARE_METAL_FINALIZER_NAMES)[number], string> = {
  BMCConfigurationController: 'BMCConfiguration',
  InfraMachineStatusController: 'InfraMachineStatus',
  MachineStatusController: 'MachineStatus',
  PowerOperationController: 'PowerOperation',
  RebootStatusController: 'RebootStatus',
  WipeStatusController: 'WipeStatus',
};

async function getOrUndefined(state: State, p: Pointer): Promise<Resource | undefined> {
  try {
    return await state.get(p);
  } catch (err) {
    if (hasCode(err, 'OMNI_NOT_FOUND')) return undefined;
    throw err;
  }
}

/** Get, then an Update without this one finalizer (COSI's RemoveFinalizer). */
async function removeOne(state: State, p: Pointer, finalizer: string): Promise<void> {
  const cur = await getOrUndefined(state, p);
  if (!cur || !cur.metadata.finalizers.includes(finalizer)) return;
  const next: Resource = {
    metadata: { ...cur.metadata, finalizers: cur.metadata.finalizers.filter((f) => f !== finalizer) },
    spec: cur.spec,
  };
  await state.update(next, { owner: cur.metadata.owner });
}

/** Get, then a Destroy as its owner. */
async function destroy(state: State, p: Pointer): Promise<void> {
  const cur = await getOrUndefined(state, p);
  if (!cur) return;
  await state.destroy(p, { owner: cur.metadata.owner });
}

export async function naiveReleaseMachine(state: State, providerId: string, uuid: string): Promise<void> {
  const ns = providerNamespace(providerId);
  const im: Pointer = { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: uuid };
  // RebootStatusController holds MachineStatus and BMCConfiguration: its teardown goes first.
  for (const name of ['MachineStatus', 'BMCConfiguration']) {
    await removeOne(
      state,
      { namespace: ns, type: providerType(name, providerId), id: uuid },
      `${providerId}.RebootStatusController`,
    );
  }
  for (const ctl of BARE_METAL_FINALIZER_NAMES) {
    const out = OUTPUT_OF[ctl];
    const p: Pointer =
      out === 'InfraMachineStatus'
        ? { namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus, id: uuid }
        : { namespace: ns, type: providerType(out, providerId), id: uuid };
    await destroy(state, p);
    await removeOne(state, im, `${providerId}.${ctl}`);
  }
}

/** The library's ProvisionController on a request being deleted (bounded wait for Omni's finalizer). */
export async function naiveReleaseRequest(
  state: State,
  providerId: string,
  rid: string,
  stateType = 'Machine',
): Promise<void> {
  const status: Pointer = { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: rid };
  await state.teardown(status);
  for (let i = 0; i < 200; i++) {
    const cur = await getOrUndefined(state, status);
    if (!cur || cur.metadata.finalizers.length === 0) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  await destroy(state, status);
  await destroy(state, {
    namespace: providerNamespace(providerId),
    type: providerType(stateType, providerId),
    id: rid,
  });
  await removeOne(
    state,
    { namespace: NS_INFRA_PROVIDER, type: T.MachineRequest, id: rid },
    `${providerId}.ProvisionController`,
  );
}
