// The bare-metal provider's spec messages (package `baremetalproviderspecs`, docs/omni-wire.md 5.3),
// one table each, with the conventions of messages.ts (decoded values and absent fields alike). Apart
// from Omni's messages because they are one provider's, carried by the types of its own namespace
// (specs.ts PROVIDER_SPEC_SCHEMAS), and change with that provider's releases, not Omni's.

import { type APIConfig, type IPMIConfig, ipmiFields } from './messages.js';
import { defineEnum, defineMessage, F } from './schema.js';

/** baremetalproviderspecs.PowerState */
export const BareMetalPowerState = { POWER_STATE_UNKNOWN: 0, POWER_STATE_OFF: 1, POWER_STATE_ON: 2 } as const;
const BareMetalPowerStateEnum = defineEnum('baremetalproviderspecs.PowerState', BareMetalPowerState);

export const BMCConfigurationIPMI = defineMessage<IPMIConfig>(
  'baremetalproviderspecs.BMCConfigurationSpec.IPMI',
  ipmiFields(),
);
export const BMCConfigurationAPI = defineMessage<APIConfig>('baremetalproviderspecs.BMCConfigurationSpec.API', [
  F.string(1, 'address'),
]);

export interface BMCConfigurationSpec {
  ipmi?: IPMIConfig | undefined;
  api?: APIConfig | undefined;
  manually_configured: boolean;
}
export const BMCConfigurationSpec = defineMessage<BMCConfigurationSpec>('baremetalproviderspecs.BMCConfigurationSpec', [
  F.message(1, 'ipmi', () => BMCConfigurationIPMI),
  F.message(2, 'api', () => BMCConfigurationAPI),
  F.bool(3, 'manually_configured'),
]);

export interface PowerOperationSpec {
  last_power_operation: number;
  last_power_on_timestamp?: string | undefined;
  last_power_off_id: string;
  wipe_id_at_power_off: string;
}
export const PowerOperationSpec = defineMessage<PowerOperationSpec>('baremetalproviderspecs.PowerOperationSpec', [
  F.enum(1, 'last_power_operation', BareMetalPowerStateEnum),
  F.timestamp(2, 'last_power_on_timestamp'),
  F.string(3, 'last_power_off_id'),
  F.string(4, 'wipe_id_at_power_off'),
]);

// Field 3 is reserved.
export interface BareMetalMachineStatusSpec {
  agent_accessible: boolean;
  power_state: number;
  initialized: boolean;
}
export const BareMetalMachineStatusSpec = defineMessage<BareMetalMachineStatusSpec>(
  'baremetalproviderspecs.MachineStatusSpec',
  [F.bool(1, 'agent_accessible'), F.enum(2, 'power_state', BareMetalPowerStateEnum), F.bool(4, 'initialized')],
);

export interface WipeStatusSpec {
  last_wipe_id: string;
  last_wipe_install_event_id: bigint;
  initial_wipe_done: boolean;
  wiped_node_unique_token: string;
}
export const WipeStatusSpec = defineMessage<WipeStatusSpec>('baremetalproviderspecs.WipeStatusSpec', [
  F.string(1, 'last_wipe_id'),
  F.uint64(2, 'last_wipe_install_event_id'),
  F.bool(3, 'initial_wipe_done'),
  F.string(4, 'wiped_node_unique_token'),
]);

export interface RebootStatusSpec {
  last_reboot_id: string;
  last_reboot_timestamp?: string | undefined;
}
export const RebootStatusSpec = defineMessage<RebootStatusSpec>('baremetalproviderspecs.RebootStatusSpec', [
  F.string(1, 'last_reboot_id'),
  F.timestamp(2, 'last_reboot_timestamp'),
]);

export interface TLSConfigSpec {
  ca_cert: string;
  ca_key: string;
}
export const TLSConfigSpec = defineMessage<TLSConfigSpec>('baremetalproviderspecs.TLSConfigSpec', [
  F.string(1, 'ca_cert'),
  F.string(2, 'ca_key'),
]);
