// Omni's spec messages (package `specs`), one table each; the bare-metal provider's are bare-metal.ts.
// Field numbers: docs/omni-wire.md 5.2; MachineSpec, MachineRequestSetSpec and SysVersionSpec were
// checked against Omni's client/api/omni/specs/{omni,system}.proto.
//
// Decoded values: strings '', bools false, numbers 0, uint64 0n, bytes empty, lists [] when absent;
// nested messages and timestamps `undefined` when absent. Timestamps are RFC 3339 strings.

import { defineEnum, defineMessage, F } from './schema.js';

type EnumValue<E> = E[keyof E];

// ---------------------------------------------------------------------------------------------
// Enums

/** specs.MachineRequestStatusSpec.Stage */
export const MachineRequestStage = { UNKNOWN: 0, PROVISIONING: 1, PROVISIONED: 2, FAILED: 3 } as const;
/** specs.InfraMachineSpec.MachinePowerState (the preferred state; no UNKNOWN, OFF is 0). */
export const InfraMachinePowerState = { POWER_STATE_OFF: 0, POWER_STATE_ON: 1 } as const;
/** specs.InfraMachineStatusSpec.MachinePowerState (numbered differently from InfraMachinePowerState). */
export const InfraMachineStatusPowerState = { POWER_STATE_UNKNOWN: 0, POWER_STATE_OFF: 1, POWER_STATE_ON: 2 } as const;
/** specs.InfraMachineConfigSpec.AcceptanceStatus */
export const AcceptanceStatus = { PENDING: 0, ACCEPTED: 1, REJECTED: 2 } as const;
/** specs.GrpcTunnelMode */
export const GrpcTunnelMode = { UNSET: 0, ENABLED: 1, DISABLED: 2 } as const;

const StageEnum = defineEnum('specs.MachineRequestStatusSpec.Stage', MachineRequestStage);
const InfraMachinePowerStateEnum = defineEnum('specs.InfraMachineSpec.MachinePowerState', InfraMachinePowerState);
const InfraMachineStatusPowerStateEnum = defineEnum(
  'specs.InfraMachineStatusSpec.MachinePowerState',
  InfraMachineStatusPowerState,
);
const AcceptanceStatusEnum = defineEnum('specs.InfraMachineConfigSpec.AcceptanceStatus', AcceptanceStatus);
const GrpcTunnelModeEnum = defineEnum('specs.GrpcTunnelMode', GrpcTunnelMode);

// Enum-typed fields are `number`, not the literal union: proto3 enums are open, and a newer Omni may
// send a value we do not know.
export type MachineRequestStageValue = EnumValue<typeof MachineRequestStage>;

// ---------------------------------------------------------------------------------------------
// Omni (package specs)

export type Empty = Record<string, never>;
export const InfraProviderSpec = defineMessage<Empty>('specs.InfraProviderSpec', []);
export const MachineRegistrationSpec = defineMessage<Empty>('specs.MachineRegistrationSpec', []);

export interface InfraProviderStatusSpec {
  schema: string;
  name: string;
  description: string;
  icon: string;
  version: string;
}
export const InfraProviderStatusSpec = defineMessage<InfraProviderStatusSpec>('specs.InfraProviderStatusSpec', [
  F.string(1, 'schema'),
  F.string(2, 'name'),
  F.string(3, 'description'),
  F.string(4, 'icon'),
  F.string(5, 'version'),
]);

export interface InfraProviderHealthStatusSpec {
  last_heartbeat_timestamp?: string | undefined;
  error: string;
}
export const InfraProviderHealthStatusSpec = defineMessage<InfraProviderHealthStatusSpec>(
  'specs.InfraProviderHealthStatusSpec',
  [F.timestamp(1, 'last_heartbeat_timestamp'), F.string(2, 'error')],
);

export interface Overlay {
  name: string;
  image: string;
}
export const Overlay = defineMessage<Overlay>('specs.Overlay', [F.string(1, 'name'), F.string(2, 'image')]);

export interface MetaValue {
  key: number;
  value: string;
}
export const MetaValue = defineMessage<MetaValue>('specs.MetaValue', [F.uint32(1, 'key'), F.string(2, 'value')]);

export interface MachineRequestSpec {
  talos_version: string;
  overlay?: Overlay | undefined;
  extensions: string[];
  kernel_args: string[];
  meta_values: MetaValue[];
  /** YAML of the provider's own data. */
  provider_data: string;
  grpc_tunnel: number;
}
export const MachineRequestSpec = defineMessage<MachineRequestSpec>('specs.MachineRequestSpec', [
  F.string(1, 'talos_version'),
  F.message(2, 'overlay', () => Overlay),
  F.string(3, 'extensions', { repeated: true }),
  F.string(4, 'kernel_args', { repeated: true }),
  F.message(5, 'meta_values', () => MetaValue, { repeated: true }),
  F.string(6, 'provider_data'),
  F.enum(7, 'grpc_tunnel', GrpcTunnelModeEnum),
]);

export interface MachineRequestStatusSpec {
  id: string;
  stage: number;
  error: string;
  status: string;
}
export const MachineRequestStatusSpec = defineMessage<MachineRequestStatusSpec>('specs.MachineRequestStatusSpec', [
  F.string(1, 'id'),
  F.enum(2, 'stage', StageEnum),
  F.string(3, 'error'),
  F.string(4, 'status'),
]);

export interface MachineRequestSetSpec {
  provider_id: string;
  machine_count: number;
  talos_version: string;
  extensions: string[];
  kernel_args: string[];
  meta_values: MetaValue[];
  provider_data: string;
  grpc_tunnel: number;
}
// Field 4 is reserved in Omni's proto.
export const MachineRequestSetSpec = defineMessage<MachineRequestSetSpec>('specs.MachineRequestSetSpec', [
  F.string(1, 'provider_id'),
  F.int32(2, 'machine_count'),
  F.string(3, 'talos_version'),
  F.string(5, 'extensions', { repeated: true }),
  F.string(6, 'kernel_args', { repeated: true }),
  F.message(7, 'meta_values', () => MetaValue, { repeated: true }),
  F.string(8, 'provider_data'),
  F.enum(9, 'grpc_tunnel', GrpcTunnelModeEnum),
]);

export interface InfraMachineSpec {
  preferred_power_state: number;
  acceptance_status: number;
  cluster_talos_version: string;
  extensions: string[];
  wipe_id: string;
  extra_kernel_args: string;
  requested_reboot_id: string;
  cordoned: boolean;
  install_event_id: bigint;
  node_unique_token: string;
  power_off_request_id: string;
}
export const InfraMachineSpec = defineMessage<InfraMachineSpec>('specs.InfraMachineSpec', [
  F.enum(1, 'preferred_power_state', InfraMachinePowerStateEnum),
  F.enum(2, 'acceptance_status', AcceptanceStatusEnum),
  F.string(3, 'cluster_talos_version'),
  F.string(4, 'extensions', { repeated: true }),
  F.string(5, 'wipe_id'),
  F.string(6, 'extra_kernel_args'),
  F.string(7, 'requested_reboot_id'),
  F.bool(8, 'cordoned'),
  F.uint64(9, 'install_event_id'),
  F.string(10, 'node_unique_token'),
  F.string(11, 'power_off_request_id'),
]);

export interface InfraMachineStatusSpec {
  power_state: number;
  ready_to_use: boolean;
  last_reboot_id: string;
  last_reboot_timestamp?: string | undefined;
  installed: boolean;
  wiped_node_unique_token: string;
  last_power_off_id: string;
}
export const InfraMachineStatusSpec = defineMessage<InfraMachineStatusSpec>('specs.InfraMachineStatusSpec', [
  F.enum(1, 'power_state', InfraMachineStatusPowerStateEnum),
  F.bool(2, 'ready_to_use'),
  F.string(3, 'last_reboot_id'),
  F.timestamp(4, 'last_reboot_timestamp'),
  F.bool(5, 'installed'),
  F.string(6, 'wiped_node_unique_token'),
  F.string(7, 'last_power_off_id'),
]);

export interface IPMIConfig {
  address: string;
  port: number;
  username: string;
  password: string;
}
export interface APIConfig {
  address: string;
}
/** The IPMI fields, the same in Omni's BMC config and the bare-metal provider's (bare-metal.ts). */
export const ipmiFields = () => [
  F.string(1, 'address'),
  F.uint32(2, 'port'),
  F.string(3, 'username'),
  F.string(4, 'password'),
];
export const InfraMachineBMCConfigIPMI = defineMessage<IPMIConfig>(
  'specs.InfraMachineBMCConfigSpec.IPMI',
  ipmiFields(),
);
export const InfraMachineBMCConfigAPI = defineMessage<APIConfig>('specs.InfraMachineBMCConfigSpec.API', [
  F.string(1, 'address'),
]);

export interface InfraMachineBMCConfigSpec {
  ipmi?: IPMIConfig | undefined;
  api?: APIConfig | undefined;
}
export const InfraMachineBMCConfigSpec = defineMessage<InfraMachineBMCConfigSpec>('specs.InfraMachineBMCConfigSpec', [
  F.message(1, 'ipmi', () => InfraMachineBMCConfigIPMI),
  F.message(2, 'api', () => InfraMachineBMCConfigAPI),
]);

export interface BMCConfigSpec {
  config?: InfraMachineBMCConfigSpec | undefined;
}
export const BMCConfigSpec = defineMessage<BMCConfigSpec>('specs.BMCConfigSpec', [
  F.message(1, 'config', () => InfraMachineBMCConfigSpec),
]);

/** Readers must handle both fields: Omni's Go client zstd-compresses patches of 2048 bytes or more. */
export interface ConfigPatchSpec {
  data: string;
  compressed_data: Uint8Array;
}
export const ConfigPatchSpec = defineMessage<ConfigPatchSpec>('specs.ConfigPatchSpec', [
  F.string(1, 'data'),
  F.bytes(2, 'compressed_data'),
]);

export interface JoinConfig {
  kernel_args: string[];
  config: string;
}
export const JoinConfig = defineMessage<JoinConfig>('specs.JoinConfig', [
  F.string(1, 'kernel_args', { repeated: true }),
  F.string(2, 'config'),
]);

export interface ProviderJoinConfigSpec {
  config?: JoinConfig | undefined;
  join_token: string;
}
export const ProviderJoinConfigSpec = defineMessage<ProviderJoinConfigSpec>('specs.ProviderJoinConfigSpec', [
  F.message(1, 'config', () => JoinConfig),
  F.string(2, 'join_token'),
]);

// Fields 3 and 4 are reserved in Omni's proto; only the fields confirmed there are listed.
export interface MachineSpec {
  management_address: string;
  connected: boolean;
  use_grpc_tunnel: boolean;
}
export const MachineSpec = defineMessage<MachineSpec>('specs.MachineSpec', [
  F.string(1, 'management_address'),
  F.bool(2, 'connected'),
  F.bool(5, 'use_grpc_tunnel'),
]);

export interface SysVersionSpec {
  backend_version: string;
  instance_name: string;
  backend_api_version: number;
}
export const SysVersionSpec = defineMessage<SysVersionSpec>('specs.SysVersionSpec', [
  F.string(1, 'backend_version'),
  F.string(2, 'instance_name'),
  F.uint32(3, 'backend_api_version'),
]);

export interface SiderolinkSpec {
  node_subnet: string;
  node_public_key: string;
  last_endpoint: string;
  connected: boolean;
  virtual_addrport: string;
  remote_addr: string;
  node_unique_token: string;
}
export const SiderolinkSpec = defineMessage<SiderolinkSpec>('specs.SiderolinkSpec', [
  F.string(1, 'node_subnet'),
  F.string(2, 'node_public_key'),
  F.string(3, 'last_endpoint'),
  F.bool(4, 'connected'),
  F.string(7, 'virtual_addrport'),
  F.string(8, 'remote_addr'),
  F.string(9, 'node_unique_token'),
]);

export interface SiderolinkAPIConfigSpec {
  machine_api_advertised_url: string;
  wireguard_advertised_endpoint: string;
  enforce_grpc_tunnel: boolean;
  events_port: number;
  logs_port: number;
}
export const SiderolinkAPIConfigSpec = defineMessage<SiderolinkAPIConfigSpec>('specs.SiderolinkAPIConfigSpec', [
  F.string(1, 'machine_api_advertised_url'),
  F.string(2, 'wireguard_advertised_endpoint'),
  F.bool(3, 'enforce_grpc_tunnel'),
  F.int32(4, 'events_port'),
  F.int32(5, 'logs_port'),
]);

export interface ConnectionParamsSpec {
  args: string;
  api_endpoint: string;
  wireguard_endpoint: string;
  join_token: string;
  use_grpc_tunnel: boolean;
  events_port: number;
  logs_port: number;
}
export const ConnectionParamsSpec = defineMessage<ConnectionParamsSpec>('specs.ConnectionParamsSpec', [
  F.string(1, 'args'),
  F.string(2, 'api_endpoint'),
  F.string(3, 'wireguard_endpoint'),
  F.string(4, 'join_token'),
  F.bool(5, 'use_grpc_tunnel'),
  F.int32(9, 'events_port'),
  F.int32(10, 'logs_port'),
]);
