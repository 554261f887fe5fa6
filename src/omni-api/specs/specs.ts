// src/omni-api/specs: the spec messages the stub reads or writes, and which resource type carries
// which. The tables are specs/messages.ts (Omni's) and bare-metal.ts (the bare-metal provider's), built
// with schema.ts; the binary codec is codec.ts, Omni's Timestamp text timestamp.ts. Types not listed
// here stay opaque `proto_spec` bytes. (The YAML forms of scenarios and dumps are the sim's:
// src/omni-sim/scenario/plain.ts.)

import { T } from '../resource.js';
import * as BM from './bare-metal.js';
import * as M from './messages.js';
import type { MessageSchema } from './schema.js';

type AnySchema = MessageSchema<unknown>;

/** Omni's own resource types (docs/omni-wire.md 5.1). */
export const OMNI_SPEC_SCHEMAS: ReadonlyMap<string, AnySchema> = new Map<string, AnySchema>([
  [T.InfraProvider, M.InfraProviderSpec],
  [T.InfraProviderStatus, M.InfraProviderStatusSpec],
  [T.InfraProviderHealthStatus, M.InfraProviderHealthStatusSpec],
  [T.MachineRequest, M.MachineRequestSpec],
  [T.MachineRequestStatus, M.MachineRequestStatusSpec],
  [T.MachineRequestSet, M.MachineRequestSetSpec],
  [T.InfraMachine, M.InfraMachineSpec],
  [T.InfraMachineStatus, M.InfraMachineStatusSpec],
  [T.InfraMachineRegistration, M.MachineRegistrationSpec],
  [T.BMCConfig, M.BMCConfigSpec],
  [T.ConfigPatchRequest, M.ConfigPatchSpec],
  [T.ProviderJoinConfig, M.ProviderJoinConfigSpec],
  [T.Link, M.SiderolinkSpec],
  [T.Machine, M.MachineSpec],
  [T.SysVersion, M.SysVersionSpec],
  ['SiderolinkAPIConfigs.omni.sidero.dev', M.SiderolinkAPIConfigSpec],
  ['ConnectionParams.omni.sidero.dev', M.ConnectionParamsSpec],
]);

/**
 * Types in a provider's own namespace, `<Name>.<id>.infraprovider.sidero.dev`, by `<Name>`. These are
 * the bare-metal provider's (docs/omni-wire.md 5.3); another provider kind that reuses a name with a
 * different message would be misread, so callers that know the provider kind should check it.
 */
export const PROVIDER_SPEC_SCHEMAS: ReadonlyMap<string, AnySchema> = new Map<string, AnySchema>([
  ['BMCConfiguration', BM.BMCConfigurationSpec],
  ['MachineStatus', BM.BareMetalMachineStatusSpec],
  ['PowerOperation', BM.PowerOperationSpec],
  ['RebootStatus', BM.RebootStatusSpec],
  ['TLSConfig', BM.TLSConfigSpec],
  ['WipeStatus', BM.WipeStatusSpec],
]);

const PROVIDER_TYPE_SUFFIX = '.infraprovider.sidero.dev';

export function specSchemaForType(type: string): MessageSchema<unknown> | undefined {
  const omni = OMNI_SPEC_SCHEMAS.get(type);
  if (omni) return omni;
  if (!type.endsWith(PROVIDER_TYPE_SUFFIX)) return undefined;
  const dot = type.indexOf('.');
  // `<Name>.<id>.infraprovider.sidero.dev`: a non-empty provider ID between name and suffix.
  if (dot <= 0 || dot + 1 >= type.length - PROVIDER_TYPE_SUFFIX.length) return undefined;
  return PROVIDER_SPEC_SCHEMAS.get(type.slice(0, dot));
}
