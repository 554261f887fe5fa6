// Spec codecs of the messages the stub reads or writes, and which resource type carries which.
// Tables live in specs/messages.ts; the binary codec in specs/codec.ts; YAML-friendly plain objects
// in specs/plain.ts. Types not listed here stay opaque `proto_spec` bytes.

import { stringify } from 'yaml';
import { T } from './resource.js';
import { decodeSpec } from './specs/codec.js';
import * as M from './specs/messages.js';
import { specToPlain } from './specs/plain.js';
import type { MessageSchema } from './specs/schema.js';

export * from './specs/schema.js';
export * from './specs/codec.js';
export * from './specs/plain.js';
export * from './specs/messages.js';
export { formatTimestamp, parseTimestamp, type TimestampParts } from './specs/timestamp.js';

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
  ['BMCConfiguration', M.BMCConfigurationSpec],
  ['MachineStatus', M.BareMetalMachineStatusSpec],
  ['PowerOperation', M.PowerOperationSpec],
  ['RebootStatus', M.RebootStatusSpec],
  ['TLSConfig', M.TLSConfigSpec],
  ['WipeStatus', M.WipeStatusSpec],
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

/**
 * The spec as `omnictl get -o yaml` shows it (keys without underscores, 4-space indent), or
 * `undefined` for a type without a schema here. Throws SpecError when the bytes do not decode.
 * Unknown fields are not shown (Go's YAML encoder does not show them either).
 */
export function renderYamlSpec(type: string, bytes: Uint8Array): string | undefined {
  const schema = specSchemaForType(type);
  if (!schema) return undefined;
  const { value } = decodeSpec(schema, bytes);
  return stringify(specToPlain(schema, value, 'omnictl'), { indent: 4, indentSeq: true });
}
