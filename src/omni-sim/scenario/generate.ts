// Scenarios made in code rather than read from YAML: N bare-metal machines and M MachineRequests of
// one provider, stuck in their deletion because the provider is gone (docs/omni-lifecycle.md 1 and 3.1).
// Used by the benchmark (tens of thousands of resources: building them directly is far faster than
// writing and parsing YAML) and by the fault and safety tests. Deterministic: the same options give
// byte-identical resources.

import type { Phase, Resource } from '../../omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_IS_STATIC_INFRA_PROVIDER,
  LABEL_MACHINE_REQUEST_SET,
  newMetadata,
  NS_INFRA_PROVIDER,
  providerNamespace,
  providerType,
  T,
} from '../../omni-api/resource.js';
import {
  InfraMachineSpec,
  InfraMachineStatusSpec,
  InfraProviderStatusSpec,
  MachineRequestSpec,
  MachineRequestStatusSpec,
} from '../../omni-api/specs/messages.js';
import {
  BareMetalMachineStatusSpec,
  BMCConfigurationSpec,
  PowerOperationSpec,
  WipeStatusSpec,
} from '../../omni-api/specs/bare-metal.js';
import { encodeSpec } from '../../omni-api/specs/codec.js';
import type { FaultConfig } from '../gateway/fault-config.js';
import type { Scenario, ScenarioIdentity } from './scenario.js';
import { DEFAULT_OMNI_VERSION } from './scenario.js';

/** The controllers of the bare-metal provider (v0.5.0+) whose finalizers sit on every InfraMachine. */
export const BARE_METAL_FINALIZER_NAMES = [
  'BMCConfigurationController',
  'InfraMachineStatusController',
  'MachineStatusController',
  'PowerOperationController',
  'RebootStatusController',
  'WipeStatusController',
] as const;

const CREATED = '2026-03-01T10:00:00Z';
const UPDATED = '2026-03-02T11:30:00Z';

/** A stable machine UUID for index `i` (and a salt, so several providers' machines differ). */
export function machineUuid(i: number, salt = 0): string {
  const hex = (n: number, w: number) => n.toString(16).padStart(w, '0');
  return `${hex(salt, 8)}-0000-4000-8000-${hex(i, 12)}`;
}

export interface GenMachineOptions {
  phase?: Phase;
  /** Extra finalizers on the InfraMachine (someone else's). */
  extraFinalizers?: string[];
  /** Whether the namespace resources and the status exist (default true). */
  outputs?: boolean;
}

function res(
  namespace: string,
  type: string,
  id: string,
  m: { owner?: string; phase?: Phase; finalizers?: string[]; labels?: Record<string, string>; version?: string },
  spec: Uint8Array,
): Resource {
  return {
    metadata: newMetadata(
      { namespace, type, id },
      {
        version: m.version ?? '3',
        owner: m.owner ?? '',
        phase: m.phase ?? 'running',
        created: CREATED,
        updated: UPDATED,
        finalizers: m.finalizers ?? [],
        labels: m.labels ?? {},
        annotations: {},
      },
    ),
    spec: { protoSpec: spec },
  };
}

/** A bare-metal provider's InfraMachine, its InfraMachineStatus and its five per-machine resources. */
export function bareMetalMachine(providerId: string, uuid: string, o: GenMachineOptions = {}): Resource[] {
  const token = `nut-${uuid.slice(-8)}`;
  const machine = bareMetalInfraMachine(providerId, uuid, token, o);
  return o.outputs === false ? [machine] : [machine, ...bareMetalOutputs(providerId, uuid, token)];
}

/** The InfraMachine, tearing down by default, with the bare-metal controllers' finalizers on it. */
function bareMetalInfraMachine(providerId: string, uuid: string, token: string, o: GenMachineOptions): Resource {
  const ctl = (name: string) => `${providerId}.${name}`;
  return res(
    NS_INFRA_PROVIDER,
    T.InfraMachine,
    uuid,
    {
      owner: 'InfraMachineController',
      phase: o.phase ?? 'tearingDown',
      labels: { [LABEL_INFRA_PROVIDER_ID]: providerId },
      version: '7',
      finalizers: [...BARE_METAL_FINALIZER_NAMES.map(ctl), ...(o.extraFinalizers ?? [])],
    },
    encodeSpec(InfraMachineSpec, {
      preferred_power_state: 0,
      acceptance_status: 1,
      cluster_talos_version: '1.9.6',
      extensions: ['siderolabs/iscsi-tools'],
      wipe_id: '',
      extra_kernel_args: '',
      requested_reboot_id: '',
      cordoned: false,
      install_event_id: 2n,
      node_unique_token: token,
      power_off_request_id: '',
    }),
  );
}

/** What the provider wrote for a machine: its InfraMachineStatus and the five resources in its namespace. */
function bareMetalOutputs(providerId: string, uuid: string, token: string): Resource[] {
  const label = { [LABEL_INFRA_PROVIDER_ID]: providerId };
  const ns = providerNamespace(providerId);
  const ctl = (name: string) => `${providerId}.${name}`;
  const reboot = [ctl('RebootStatusController')];
  return [
    res(
      NS_INFRA_PROVIDER,
      T.InfraMachineStatus,
      uuid,
      { owner: ctl('InfraMachineStatusController'), labels: label, version: '12' },
      encodeSpec(InfraMachineStatusSpec, {
        power_state: 2,
        ready_to_use: true,
        last_reboot_id: '',
        installed: true,
        wiped_node_unique_token: token,
        last_power_off_id: '',
      }),
    ),
    res(
      ns,
      providerType('BMCConfiguration', providerId),
      uuid,
      { owner: ctl('BMCConfigurationController'), finalizers: reboot, version: '2' },
      encodeSpec(BMCConfigurationSpec, {
        ipmi: { address: '10.0.0.9', port: 623, username: 'admin', password: 'example-not-a-secret' },
        manually_configured: false,
      }),
    ),
    res(
      ns,
      providerType('MachineStatus', providerId),
      uuid,
      { owner: ctl('MachineStatusController'), finalizers: reboot, version: '9' },
      encodeSpec(BareMetalMachineStatusSpec, { agent_accessible: false, power_state: 2, initialized: true }),
    ),
    res(
      ns,
      providerType('PowerOperation', providerId),
      uuid,
      { owner: ctl('PowerOperationController'), version: '4' },
      encodeSpec(PowerOperationSpec, { last_power_operation: 2, last_power_off_id: '', wipe_id_at_power_off: '' }),
    ),
    res(
      ns,
      providerType('RebootStatus', providerId),
      uuid,
      { owner: ctl('RebootStatusController'), version: '1' },
      new Uint8Array(0),
    ),
    res(
      ns,
      providerType('WipeStatus', providerId),
      uuid,
      { owner: ctl('WipeStatusController'), version: '3' },
      encodeSpec(WipeStatusSpec, {
        last_wipe_id: '',
        last_wipe_install_event_id: 2n,
        initial_wipe_done: true,
        wiped_node_unique_token: token,
      }),
    ),
  ];
}

export interface GenRequestOptions {
  phase?: Phase;
  /** The per-request state type's short name (default `Machine`, as every public SDK provider). */
  stateType?: string;
  set?: string;
  /** Whether the status and state resource exist (default true). */
  outputs?: boolean;
}

/**
 * An SDK provider's MachineRequest with its MachineRequestStatus (Omni's cleanup finalizer on it) and state resource.
 */
export function provisionedRequest(providerId: string, rid: string, o: GenRequestOptions = {}): Resource[] {
  const labels = { [LABEL_INFRA_PROVIDER_ID]: providerId, [LABEL_MACHINE_REQUEST_SET]: o.set ?? 'workers' };
  const owner = `${providerId}.ProvisionController`;
  const out: Resource[] = [
    res(
      NS_INFRA_PROVIDER,
      T.MachineRequest,
      rid,
      {
        owner: 'MachineRequestSetStatusController',
        phase: o.phase ?? 'tearingDown',
        labels,
        finalizers: [owner],
        version: '4',
      },
      encodeSpec(MachineRequestSpec, {
        talos_version: 'v1.9.5',
        extensions: ['siderolabs/qemu-guest-agent'],
        kernel_args: [],
        meta_values: [],
        provider_data: 'cores: 4\nmemory: 8192\n',
        grpc_tunnel: 0,
      }),
    ),
  ];
  if (o.outputs === false) return out;
  out.push(
    res(
      NS_INFRA_PROVIDER,
      T.MachineRequestStatus,
      rid,
      { owner, labels, finalizers: ['MachineRequestStatusCleanupController'], version: '6' },
      encodeSpec(MachineRequestStatusSpec, { id: '', stage: 2, error: '', status: 'Provision Complete' }),
    ),
    res(
      providerNamespace(providerId),
      providerType(o.stateType ?? 'Machine', providerId),
      rid,
      { owner, version: '5' },
      new Uint8Array([0x0a, 0x04, 0x76, 0x6d, 0x2d, 0x31]),
    ),
  );
  return out;
}

/** The registration (InfraProvider with Omni's cleanup finalizer) and the provider's ProviderStatus. */
export function providerRegistration(providerId: string, o: { static?: boolean } = {}): Resource[] {
  return [
    res(
      NS_INFRA_PROVIDER,
      T.InfraProvider,
      providerId,
      { finalizers: ['InfraProviderCleanupController'], version: '1' },
      new Uint8Array(0),
    ),
    res(
      NS_INFRA_PROVIDER,
      T.InfraProviderStatus,
      providerId,
      {
        labels: {
          [LABEL_INFRA_PROVIDER_ID]: providerId,
          ...(o.static ? { [LABEL_IS_STATIC_INFRA_PROVIDER]: '' } : {}),
        },
      },
      encodeSpec(InfraProviderStatusSpec, {
        schema: '',
        name: providerId,
        description: 'infrastructure provider',
        icon: '',
        version: 'v0.12.0',
      }),
    ),
  ];
}

export interface GenerateOptions {
  providerId?: string;
  /** Stuck bare-metal machines (tearing down, six finalizers, seven resources each). */
  machines: number;
  /** Stuck MachineRequests (tearing down, with status and state resource). */
  requests?: number;
  omniVersion?: string;
  faults?: FaultConfig;
}

/** The benchmark's scenario: one provider with `machines` stuck machines and `requests` stuck requests. */
export function generateScenario(o: GenerateOptions): Scenario {
  const id = o.providerId ?? 'bench';
  const resources: Resource[] = [...providerRegistration(id, { static: o.machines > 0 })];
  for (let i = 0; i < o.machines; i++) resources.push(...bareMetalMachine(id, machineUuid(i)));
  for (let i = 0; i < (o.requests ?? 0); i++)
    resources.push(...provisionedRequest(id, `workers-${i.toString(36).padStart(6, '0')}`));
  const identities: ScenarioIdentity[] = [{ name: `infra-provider:${id}`, role: 'InfraProvider', publicKeys: [] }];
  return { omniVersion: o.omniVersion ?? DEFAULT_OMNI_VERSION, identities, resources, faults: o.faults ?? {} };
}
