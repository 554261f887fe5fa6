// A per-request type linked to its request by the `omni.sidero.dev/machine-request` label, not by its
// ID (OpenNebula's NameReservation, docs/providers.md): destroyed with the request it names, or as a
// leftover once a Get of that request answered NotFound; never for a request in use, never by its ID.

import { afterEach, describe, expect, it } from 'vitest';
import type { Sim } from '../../src/omni-sim/index.js';
import { LABEL_MACHINE_REQUEST, providerNamespace, providerType } from '../../src/omni-api/resource.js';
import { planIn, providerSim, runIn } from '../helpers/cli-config.js';
import { providerStatus, provisionedRequest, res } from '../helpers/provider-fixtures.js';

const ID = 'opennebula';
const TYPE = providerType('NameReservation', ID);

const sims: Sim[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

/** A reservation as the provider's allocator makes it: its ID names the hostname slot, its label the request. */
function reservation(ordinal: number, request?: string) {
  return res(providerNamespace(ID), TYPE, `name-reservation/prod/worker/${ordinal}`, {
    labels: {
      'omni.sidero.dev/cluster': 'prod',
      'omni.sidero.dev/hostname': `prod-worker-${ordinal}`,
      ...(request ? { [LABEL_MACHINE_REQUEST]: request } : {}),
    },
  });
}

async function openNebula(): Promise<Sim> {
  const s = await providerSim(
    '1.9.3',
    [
      providerStatus(ID, false),
      ...provisionedRequest(ID, 'r-del'),
      ...provisionedRequest(ID, 'r-use', { phase: 'running' }),
      reservation(1, 'r-del'),
      reservation(2, 'r-use'),
      reservation(3),
      reservation(4, 'r-gone'),
    ],
    { ids: [ID] },
  );
  sims.push(s);
  return s;
}

const left = (s: Sim) =>
  s.store
    .all()
    .filter((r) => r.metadata.type === TYPE)
    .map((r) => r.metadata.id)
    .sort();

describe.each([[[]], [['--state-type', 'NameReservation']]])('NameReservation, args %j', (extra: string[]) => {
  it('goes with the request its label names or once that request is gone; in-use and unlabelled stay', async () => {
    const s = await openNebula();
    const plan = await planIn(s, ID, ['--no-deregister', ...extra]);
    const planned = plan.planned!.items.flatMap((i) => i.steps.map((st) => JSON.stringify(st)));
    for (const n of [1, 4]) expect(planned.some((st) => st.includes(`name-reservation/prod/worker/${n}`))).toBe(true);
    expect(planned.some((st) => st.includes('name-reservation/prod/worker/2'))).toBe(false);
    expect(planned.some((st) => st.includes('name-reservation/prod/worker/3'))).toBe(false);

    const rep = await runIn(s, ID, ['--no-deregister', ...extra]);
    expect(rep.exitCode).toBe(0);
    expect(rep.released.map((r) => `${r.kind}/${r.id}`)).toContain('MachineRequest/r-del');
    expect(rep.running.map((r) => `${r.kind}/${r.id}`)).toContain('MachineRequest/r-use');
    expect(left(s)).toEqual(['name-reservation/prod/worker/2', 'name-reservation/prod/worker/3']);
  });
});

it('an unlabelled NameReservation belongs to no request: the deregistration empties the namespace of it', async () => {
  const s = await providerSim(
    '1.9.3',
    [providerStatus(ID, false), ...provisionedRequest(ID, 'r-del'), reservation(3)],
    {
      ids: [ID],
    },
  );
  sims.push(s);
  const rep = await runIn(s, ID);
  expect(rep.exitCode).toBe(0);
  expect(rep.deregistration).toMatchObject({ status: 'deregistered' });
  expect(left(s)).toEqual([]);
});
