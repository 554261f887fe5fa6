// Resources as a bare-metal or SDK-based provider leaves them behind, for tests of src/provider.

import type { Phase, Resource } from '../../src/omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_IS_STATIC_INFRA_PROVIDER,
  LABEL_MACHINE_REQUEST,
  LABEL_MACHINE_REQUEST_SET,
  NS_DEFAULT,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  T,
  newMetadata,
  providerNamespace,
  providerType,
} from '../../src/omni-api/resource.js';
import {
  InfraProviderHealthStatusSpec,
  InfraProviderStatusSpec,
  MachineRequestStage,
  MachineRequestStatusSpec,
} from '../../src/omni-api/specs/messages.js';
import { BMCConfigurationSpec } from '../../src/omni-api/specs/bare-metal.js';
import { encodeSpec } from '../../src/omni-api/specs/codec.js';
import { BARE_METAL_CONTROLLERS } from '../../src/provider/profile.js';
import type { ReconcileOptions } from '../../src/provider/run/contract.js';

export interface Opts {
  phase?: Phase;
  finalizers?: string[];
  labels?: Record<string, string>;
  owner?: string;
  spec?: Uint8Array;
}

export function res(namespace: string, type: string, id: string, o: Opts = {}): Resource {
  return {
    metadata: newMetadata(
      { namespace, type, id },
      {
        version: '1',
        phase: o.phase ?? 'running',
        finalizers: o.finalizers ?? [],
        labels: o.labels ?? {},
        owner: o.owner ?? '',
      },
    ),
    spec: { protoSpec: o.spec ?? new Uint8Array() },
  };
}

export const label = (id: string) => ({ [LABEL_INFRA_PROVIDER_ID]: id });

export interface MachineOpts {
  phase?: Phase;
  /** Omni < 1.3: its MachineStatusController finalizer on the InfraMachineStatus. */
  omniOnStatus?: boolean;
  /** Finalizers on the InfraMachine (default: the six bare-metal ones). */
  finalizers?: string[];
  bmcPassword?: string;
}

/** A bare-metal InfraMachine with its InfraMachineStatus and five namespace resources. */
export function bareMetalMachine(id: string, uuid: string, o: MachineOpts = {}): Resource[] {
  const fins = o.finalizers ?? BARE_METAL_CONTROLLERS.map((c) => `${id}.${c}`);
  const ns = providerNamespace(id);
  const reboot = [`${id}.RebootStatusController`];
  return [
    res(NS_INFRA_PROVIDER, T.InfraMachine, uuid, {
      phase: o.phase ?? 'tearingDown',
      finalizers: fins,
      labels: label(id),
      owner: 'InfraMachineController',
    }),
    res(NS_INFRA_PROVIDER, T.InfraMachineStatus, uuid, {
      labels: label(id),
      owner: `${id}.InfraMachineStatusController`,
      finalizers: o.omniOnStatus ? ['MachineStatusController'] : [],
    }),
    res(ns, providerType('MachineStatus', id), uuid, { owner: `${id}.MachineStatusController`, finalizers: reboot }),
    res(ns, providerType('BMCConfiguration', id), uuid, {
      owner: `${id}.BMCConfigurationController`,
      finalizers: reboot,
      spec: encodeSpec(BMCConfigurationSpec, {
        ipmi: { address: '10.0.0.9', port: 623, username: 'admin', password: o.bmcPassword ?? 'hunter2' },
        manually_configured: false,
      }),
    }),
    res(ns, providerType('PowerOperation', id), uuid, { owner: `${id}.PowerOperationController` }),
    res(ns, providerType('RebootStatus', id), uuid, { owner: `${id}.RebootStatusController` }),
    res(ns, providerType('WipeStatus', id), uuid, { owner: `${id}.WipeStatusController` }),
  ];
}

export interface RequestOpts {
  phase?: Phase;
  stage?: number;
  machineUuid?: string;
  /** Omni's cleanup finalizer on the status (default true). */
  omniOnStatus?: boolean;
  stateType?: string;
  withStatus?: boolean;
  withCpr?: boolean;
  set?: string;
}

/** An SDK provider's MachineRequest with its status, state resource and a ConfigPatchRequest. */
export function provisionedRequest(id: string, rid: string, o: RequestOpts = {}): Resource[] {
  const labels = { ...label(id), [LABEL_MACHINE_REQUEST_SET]: o.set ?? 'workers' };
  const out = [
    res(NS_INFRA_PROVIDER, T.MachineRequest, rid, {
      phase: o.phase ?? 'tearingDown',
      finalizers: [`${id}.ProvisionController`, 'ClusterMachineRequestStatusController'],
      labels,
    }),
  ];
  if (o.withStatus ?? true) {
    out.push(
      res(NS_INFRA_PROVIDER, T.MachineRequestStatus, rid, {
        labels,
        owner: `${id}.ProvisionController`,
        finalizers: (o.omniOnStatus ?? true) ? ['MachineRequestStatusCleanupController'] : [],
        spec: encodeSpec(MachineRequestStatusSpec, {
          id: o.machineUuid ?? '',
          stage: o.stage ?? MachineRequestStage.PROVISIONED,
          error: '',
          status: 'Provision Complete',
        }),
      }),
    );
    out.push(
      res(providerNamespace(id), providerType(o.stateType ?? 'Machine', id), rid, {
        owner: `${id}.ProvisionController`,
      }),
    );
  }
  if (o.withCpr ?? true) {
    out.push(
      res(NS_INFRA_PROVIDER, T.ConfigPatchRequest, `${rid}-patch`, {
        labels: { ...label(id), [LABEL_MACHINE_REQUEST]: rid },
        owner: `${id}.ProvisionController`,
        finalizers: ['ConfigPatchRequestController'],
      }),
    );
  }
  return out;
}

export function providerStatus(id: string, isStatic: boolean, description = 'Bare Metal provider'): Resource {
  return res(NS_INFRA_PROVIDER, T.InfraProviderStatus, id, {
    labels: { ...label(id), ...(isStatic ? { [LABEL_IS_STATIC_INFRA_PROVIDER]: '' } : {}) },
    spec: encodeSpec(InfraProviderStatusSpec, {
      schema: '{"type":"object"}',
      name: 'Bare Metal',
      description,
      icon: 'aWNvbg',
      version: 'v0.12.0',
    }),
  });
}

export function healthStatus(id: string, at: number, error = ''): Resource {
  return res(NS_INFRA_PROVIDER_EPHEMERAL, T.InfraProviderHealthStatus, id, {
    labels: label(id),
    owner: `${id}.ProviderHealthStatusController`,
    spec: encodeSpec(InfraProviderHealthStatusSpec, { last_heartbeat_timestamp: new Date(at).toISOString(), error }),
  });
}

export function omniMachine(
  id: string,
  uuid: string,
  o: { phase?: Phase; asAnnotation?: boolean; request?: string } = {},
): Resource {
  const r = res(NS_DEFAULT, T.Machine, uuid, { phase: o.phase ?? 'running', owner: 'MachineController' });
  if (o.asAnnotation) r.metadata.annotations[LABEL_INFRA_PROVIDER_ID] = id;
  else r.metadata.labels[LABEL_INFRA_PROVIDER_ID] = id;
  if (o.request) r.metadata.labels[LABEL_MACHINE_REQUEST] = o.request;
  return r;
}

/**
 * The options of a reconcile in the provider tests, one place for their defaults: the whole provider
 * released and deregistered, no --wait, short waits for Omni, four calls in flight.
 */
export function reconcileOptions(providerId: string, o: Partial<ReconcileOptions> = {}): ReconcileOptions {
  return {
    providerId,
    machines: [],
    profile: 'auto',
    stateTypes: [],
    deregister: true,
    wait: false,
    timeoutMs: 5_000,
    omniWaitMs: 2_000,
    concurrency: 4,
    ...o,
  };
}
