// The starting state of `stub-provider demo`: an Omni where two providers are gone.
//   bare-metal (static): registered, its last heartbeat days old; one machine deleted while the
//     provider was gone (tearing down, held by the six controller finalizers, its InfraMachineStatus
//     and five resources in infra-provider:bare-metal still there), one machine still in use.
//   kubevirt (SDK-based provisioning): a user-owned MachineRequestSet with one provisioned request
//     (finalizer, MachineRequestStatus, state resource, ConfigPatchRequest); the demo scales the set
//     down and creates a new request while the provider is offline.
// Shapes as docs/omni-lifecycle.md 1 and 3.1 describe them; the sim's controllers add Omni's own finalizers.

import type { Resource } from '../../omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_IS_STATIC_INFRA_PROVIDER,
  LABEL_MACHINE_REQUEST,
  LABEL_MACHINE_REQUEST_SET,
  NS_DEFAULT,
  NS_EPHEMERAL,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  T,
  newMetadata,
  providerNamespace,
  providerType,
} from '../../omni-api/resource.js';
import type { Metadata, Phase } from '../../omni-api/resource.js';
import {
  AcceptanceStatus,
  InfraMachineSpec,
  InfraMachineStatusPowerState,
  InfraMachineStatusSpec,
  InfraProviderHealthStatusSpec,
  InfraProviderStatusSpec,
  MachineRequestSetSpec,
  MachineRequestSpec,
  MachineRequestStage,
  MachineRequestStatusSpec,
  SysVersionSpec,
} from '../../omni-api/specs/messages.js';
import { BMCConfigurationSpec } from '../../omni-api/specs/bare-metal.js';
import { encodeSpec } from '../../omni-api/specs/codec.js';
import type { Scenario } from '../../omni-sim/scenario/scenario.js';
import { atLeast } from '../../omni-sim/version.js';
import { BARE_METAL_CONTROLLERS, HEALTH_STATUS_CONTROLLER, PROVISION_CONTROLLER } from '../../provider/profile.js';

export const DEMO = {
  bareMetal: 'bare-metal',
  kubevirt: 'kubevirt',
  /** Deleted in Omni while bare-metal was gone: stuck tearing down. */
  stuckMachine: '9b2f6a10-0c1d-4e5f-8a9b-112233445566',
  /** Still in a cluster: nobody asked to delete it. */
  runningMachine: '7c3e1b22-5d6f-4a8b-9c0d-223344556677',
  set: 'talos-workers',
  /** The set's provisioned request, torn down when the set is scaled down. */
  scaledDownRequest: 'talos-workers-x7k2pq',
  /** Created while kubevirt is offline: the stub refuses it. */
  newRequest: 'talos-extra-p4q8rz',
  kubevirtMachine: '4c1e2d3f-5a6b-4c7d-8e9f-a0b1c2d3e4f5',
} as const;

export const DEFAULT_DEMO_OMNI_VERSION = '1.3.4';

const DAY_MS = 86_400_000;

function res(
  md: Partial<Metadata> & Pick<Metadata, 'namespace' | 'type' | 'id'>,
  spec: Uint8Array = new Uint8Array(),
): Resource {
  const { namespace, type, id, ...rest } = md;
  return { metadata: newMetadata({ namespace, type, id }, { version: '1', ...rest }), spec: { protoSpec: spec } };
}

/** The provider ID on a Link or Machine: an annotation up to Omni 1.3, a label from 1.4. */
function providerMark(version: string, id: string): Pick<Metadata, 'labels' | 'annotations'> {
  return atLeast(version, '1.4')
    ? { labels: { [LABEL_INFRA_PROVIDER_ID]: id }, annotations: {} }
    : { labels: {}, annotations: { [LABEL_INFRA_PROVIDER_ID]: id } };
}

/** A bare-metal InfraMachine with the provider's outputs: InfraMachineStatus and its five namespace resources. */
function bareMetalMachine(id: string, uuid: string, phase: Phase): Resource[] {
  const labels = { [LABEL_INFRA_PROVIDER_ID]: id };
  const ns = providerNamespace(id);
  const reboot = [`${id}.RebootStatusController`];
  const own = (name: string) => `${id}.${name}`;
  return [
    res(
      {
        namespace: NS_INFRA_PROVIDER,
        type: T.InfraMachine,
        id: uuid,
        owner: 'InfraMachineController',
        phase,
        labels,
        finalizers: BARE_METAL_CONTROLLERS.map(own),
      },
      encodeSpec(InfraMachineSpec, {
        preferred_power_state: 0,
        acceptance_status: AcceptanceStatus.ACCEPTED,
        cluster_talos_version: '1.9.6',
        extensions: [],
        wipe_id: '',
        extra_kernel_args: '',
        requested_reboot_id: '',
        cordoned: false,
        install_event_id: 1n,
        node_unique_token: `nut-${uuid.slice(0, 8)}`,
        power_off_request_id: '',
      }),
    ),
    res(
      {
        namespace: NS_INFRA_PROVIDER,
        type: T.InfraMachineStatus,
        id: uuid,
        owner: own('InfraMachineStatusController'),
        labels,
      },
      encodeSpec(InfraMachineStatusSpec, {
        power_state: InfraMachineStatusPowerState.POWER_STATE_ON,
        ready_to_use: true,
        last_reboot_id: '',
        installed: true,
        wiped_node_unique_token: `nut-${uuid.slice(0, 8)}`,
        last_power_off_id: '',
      }),
    ),
    res(
      {
        namespace: ns,
        type: providerType('BMCConfiguration', id),
        id: uuid,
        owner: own('BMCConfigurationController'),
        finalizers: reboot,
      },
      encodeSpec(BMCConfigurationSpec, {
        ipmi: { address: '192.0.2.10', port: 623, username: 'admin', password: 'demo-not-a-secret' },
        manually_configured: false,
      }),
    ),
    res({
      namespace: ns,
      type: providerType('MachineStatus', id),
      id: uuid,
      owner: own('MachineStatusController'),
      finalizers: reboot,
    }),
    res({ namespace: ns, type: providerType('PowerOperation', id), id: uuid, owner: own('PowerOperationController') }),
    res({ namespace: ns, type: providerType('RebootStatus', id), id: uuid, owner: own('RebootStatusController') }),
    res({ namespace: ns, type: providerType('WipeStatus', id), id: uuid, owner: own('WipeStatusController') }),
  ];
}

function registration(id: string): Resource {
  return res({
    namespace: NS_INFRA_PROVIDER,
    type: T.InfraProvider,
    id,
    finalizers: ['InfraProviderCleanupController'],
  });
}

function providerStatus(id: string, name: string, isStatic: boolean): Resource {
  return res(
    {
      namespace: NS_INFRA_PROVIDER,
      type: T.InfraProviderStatus,
      id,
      labels: { [LABEL_INFRA_PROVIDER_ID]: id, ...(isStatic ? { [LABEL_IS_STATIC_INFRA_PROVIDER]: '' } : {}) },
    },
    encodeSpec(InfraProviderStatusSpec, {
      schema: '{"type":"object"}',
      name,
      description: `${name} infrastructure provider`,
      icon: '',
      version: 'v0.12.0',
    }),
  );
}

/** The provider's last heartbeat, long ago: its process is gone (a heartbeat younger than 60 s would stop the stub). */
function staleHeartbeat(id: string, at: number): Resource {
  return res(
    {
      namespace: NS_INFRA_PROVIDER_EPHEMERAL,
      type: T.InfraProviderHealthStatus,
      id,
      owner: `${id}.${HEALTH_STATUS_CONTROLLER}`,
      labels: { [LABEL_INFRA_PROVIDER_ID]: id },
    },
    encodeSpec(InfraProviderHealthStatusSpec, { last_heartbeat_timestamp: new Date(at).toISOString(), error: '' }),
  );
}

/** The demo's Omni at `omniVersion` (e.g. 1.3.4, 1.4.2). `now` dates the stale heartbeats. */
export function demoScenario(omniVersion: string, now: number = Date.now()): Scenario {
  const { bareMetal: bm, kubevirt: kv } = DEMO;
  const resources: Resource[] = [
    res(
      { namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' },
      encodeSpec(SysVersionSpec, { backend_version: `v${omniVersion}`, instance_name: 'demo', backend_api_version: 1 }),
    ),
    ...bareMetalProvider(omniVersion, now),
    ...kubevirtProvider(omniVersion, now),
  ];
  return {
    omniVersion,
    identities: [
      { name: `infra-provider:${bm}`, role: 'InfraProvider', publicKeys: [] },
      { name: `infra-provider:${kv}`, role: 'InfraProvider', publicKeys: [] },
    ],
    resources,
    faults: {},
  };
}

/** bare-metal, static: one machine stuck tearing down on its finalizers, one still in use. */
function bareMetalProvider(omniVersion: string, now: number): Resource[] {
  const bm = DEMO.bareMetal;
  const running = DEMO.runningMachine;
  return [
    registration(bm),
    providerStatus(bm, 'Bare Metal', true),
    staleHeartbeat(bm, now - 3 * DAY_MS),
    ...bareMetalMachine(bm, DEMO.stuckMachine, 'tearingDown'),
    ...bareMetalMachine(bm, running, 'running'),
    res({ namespace: NS_DEFAULT, type: T.Link, id: running, ...providerMark(omniVersion, bm) }),
    res({
      namespace: NS_DEFAULT,
      type: T.Machine,
      id: running,
      owner: 'MachineController',
      ...providerMark(omniVersion, bm),
    }),
  ];
}

/** kubevirt, provisioning: a MachineRequestSet with one provisioned machine (its request, status, state, patch). */
function kubevirtProvider(omniVersion: string, now: number): Resource[] {
  const kv = DEMO.kubevirt;
  const kvLabels = { [LABEL_INFRA_PROVIDER_ID]: kv, [LABEL_MACHINE_REQUEST_SET]: DEMO.set };
  const provisionController = `${kv}.${PROVISION_CONTROLLER}`;
  const requestSpec = encodeSpec(MachineRequestSpec, {
    talos_version: 'v1.9.5',
    extensions: [],
    kernel_args: [],
    meta_values: [],
    provider_data: 'cores: 4\nmemory: 8192\n',
    grpc_tunnel: 0,
  });
  return [
    registration(kv),
    providerStatus(kv, 'KubeVirt', false),
    staleHeartbeat(kv, now - 2 * DAY_MS),
    res(
      { namespace: NS_DEFAULT, type: T.MachineRequestSet, id: DEMO.set },
      encodeSpec(MachineRequestSetSpec, {
        provider_id: kv,
        machine_count: 1,
        talos_version: 'v1.9.5',
        extensions: [],
        kernel_args: [],
        meta_values: [],
        provider_data: '',
        grpc_tunnel: 0,
      }),
    ),
    res(
      {
        namespace: NS_INFRA_PROVIDER,
        type: T.MachineRequest,
        id: DEMO.scaledDownRequest,
        owner: atLeast(omniVersion, '1.7') ? '' : 'MachineRequestSetStatusController',
        labels: kvLabels,
        finalizers: [provisionController],
      },
      requestSpec,
    ),
    res(
      {
        namespace: NS_INFRA_PROVIDER,
        type: T.MachineRequestStatus,
        id: DEMO.scaledDownRequest,
        owner: provisionController,
        labels: kvLabels,
      },
      encodeSpec(MachineRequestStatusSpec, {
        id: DEMO.kubevirtMachine,
        stage: MachineRequestStage.PROVISIONED,
        error: '',
        status: 'Provision Complete',
      }),
    ),
    res({
      namespace: providerNamespace(kv),
      type: providerType('Machine', kv),
      id: DEMO.scaledDownRequest,
      owner: provisionController,
    }),
    res({
      namespace: NS_INFRA_PROVIDER,
      type: T.ConfigPatchRequest,
      id: `500-${DEMO.scaledDownRequest}-network`,
      owner: provisionController,
      labels: { [LABEL_INFRA_PROVIDER_ID]: kv, [LABEL_MACHINE_REQUEST]: DEMO.scaledDownRequest },
    }),
  ];
}
