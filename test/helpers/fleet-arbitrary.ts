// Random Omni states for the provider's properties: several providers whose IDs are prefixes of each
// other or differ only in case, Omni's finalizers, running and tearing-down mixes, statuses, per-machine
// state, ConfigPatchRequests, orphaned statuses; whole-provider or per-machine runs.

import fc from 'fast-check';
import type { Phase, Resource } from '../../src/omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_MACHINE_REQUEST,
  NS_INFRA_PROVIDER,
  T,
  providerNamespace,
  providerType,
} from '../../src/omni-api/resource.js';
import { res } from './provider-fixtures.js';

export const IDS = ['bm', 'bm-2', 'BM', 'b', 'bm.x'] as const;
export const OMNI = [
  'InfraMachineController',
  'ClusterMachineRequestStatusController',
  'MachineRequestStatusCleanupController',
  'ConfigPatchRequestController',
  'MachineStatusController',
  'MachineSetNodeController',
];
const CTRLS = ['WipeStatusController', 'ProvisionController', 'RebootStatusController', 'x.Y'];
const PHASES: Phase[] = ['running', 'tearingDown'];

const finalizerArb = fc.oneof(
  fc.constantFrom(...OMNI),
  fc.tuple(fc.constantFrom(...IDS), fc.constantFrom(...CTRLS)).map(([id, c]) => `${id}.${c}`),
);
const finsArb = fc.uniqueArray(finalizerArb, { maxLength: 4 });

export interface MachineSpec {
  kind: 'static' | 'request';
  provider: (typeof IDS)[number];
  labelAs: (typeof IDS)[number];
  phase: Phase;
  fins: string[];
  withStatus: boolean;
  statusFins: string[];
  withNs: boolean;
  nsFins: string[];
  withCpr: boolean;
}

const machineArb: fc.Arbitrary<MachineSpec> = fc.record({
  kind: fc.constantFrom('static' as const, 'request' as const),
  provider: fc.constantFrom(...IDS),
  labelAs: fc.constantFrom(...IDS),
  phase: fc.constantFrom(...PHASES),
  fins: finsArb,
  withStatus: fc.boolean(),
  statusFins: fc.uniqueArray(fc.constantFrom(...OMNI), { maxLength: 1 }),
  withNs: fc.boolean(),
  nsFins: finsArb,
  withCpr: fc.boolean(),
});

export function build(ms: MachineSpec[], orphans: { provider: (typeof IDS)[number]; id: string }[]): Resource[] {
  const out: Resource[] = [];
  ms.forEach((m, i) => {
    const id = `m${i}`;
    const labels = { [LABEL_INFRA_PROVIDER_ID]: m.labelAs };
    if (m.kind === 'static') {
      out.push(
        res(NS_INFRA_PROVIDER, T.InfraMachine, id, {
          phase: m.phase,
          finalizers: m.fins,
          labels,
          owner: 'InfraMachineController',
        }),
      );
      if (m.withStatus)
        out.push(
          res(NS_INFRA_PROVIDER, T.InfraMachineStatus, id, {
            labels,
            owner: `${m.provider}.InfraMachineStatusController`,
            finalizers: m.statusFins,
          }),
        );
      if (m.withNs)
        out.push(
          res(providerNamespace(m.provider), providerType('MachineStatus', m.provider), id, {
            owner: `${m.provider}.MachineStatusController`,
            finalizers: m.nsFins,
          }),
        );
    } else {
      out.push(res(NS_INFRA_PROVIDER, T.MachineRequest, id, { phase: m.phase, finalizers: m.fins, labels }));
      if (m.withStatus)
        out.push(
          res(NS_INFRA_PROVIDER, T.MachineRequestStatus, id, {
            labels,
            owner: `${m.provider}.ProvisionController`,
            finalizers: m.statusFins,
          }),
        );
      if (m.withNs)
        out.push(
          res(providerNamespace(m.provider), providerType('Machine', m.provider), id, {
            owner: `${m.provider}.ProvisionController`,
            finalizers: m.nsFins,
          }),
        );
      if (m.withCpr)
        out.push(
          res(NS_INFRA_PROVIDER, T.ConfigPatchRequest, `${id}-p`, {
            labels: { ...labels, [LABEL_MACHINE_REQUEST]: id },
            owner: `${m.provider}.ProvisionController`,
          }),
        );
    }
  });
  for (const o of orphans)
    out.push(
      res(NS_INFRA_PROVIDER, T.InfraMachineStatus, `${o.id}-${o.provider}`, {
        labels: { [LABEL_INFRA_PROVIDER_ID]: o.provider },
        owner: `${o.provider}.InfraMachineStatusController`,
      }),
    );
  return out;
}

export const stateArb = fc.record({
  target: fc.constantFrom(...IDS),
  machines: fc.array(machineArb, { maxLength: 7 }),
  orphans: fc.uniqueArray(fc.record({ provider: fc.constantFrom(...IDS), id: fc.constantFrom('o1', 'o2') }), {
    maxLength: 3,
    selector: (o) => `${o.id}-${o.provider}`,
  }),
  perMachine: fc.option(fc.uniqueArray(fc.constantFrom('m0', 'm1', 'm2', 'zz'), { minLength: 1, maxLength: 2 }), {
    nil: undefined,
  }),
  deregister: fc.boolean(),
});

export interface Input {
  target: string;
  machines: MachineSpec[];
  orphans: { provider: (typeof IDS)[number]; id: string }[];
  perMachine: string[] | undefined;
  deregister: boolean;
}
