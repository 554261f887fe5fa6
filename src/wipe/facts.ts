// MachineFacts from the BMC data Omni or the bare-metal provider keeps. Takes the decoded specs as
// plain objects (src/omni-api/specs/specs.ts decodes the protobuf bytes):
//   bare-metal BMCConfigurationSpec: { ipmi: { address, port, username, password }, api: { address } }
//   Omni infra.BMCConfigSpec:        { config: { ipmi: {...}, api: {...} } }
// Proto3 defaults ("" and 0) mean "not set".

import type { BmcFacts, MachineFacts } from './types.js';

export interface IpmiSpecLike {
  address?: string | null;
  port?: number | null;
  username?: string | null;
  password?: string | null;
}

export interface BmcSpecLike {
  ipmi?: IpmiSpecLike | null;
  api?: { address?: string | null } | null;
}

/** Either spec shape; `config` (Omni's BMCConfigSpec) wins when present. */
export type AnyBmcSpec = BmcSpecLike | { config?: BmcSpecLike | null };

export function bmcFactsFromSpec(spec: AnyBmcSpec | null | undefined): BmcFacts | undefined {
  if (!spec) return undefined;
  const s: BmcSpecLike | null | undefined = 'config' in spec ? spec.config : (spec as BmcSpecLike);
  if (!s) return undefined;
  const facts: BmcFacts = {};
  const ipmi = s.ipmi ?? {};
  if (ipmi.address) facts.address = ipmi.address;
  if (ipmi.port && Number.isInteger(ipmi.port) && ipmi.port > 0 && ipmi.port < 65536) facts.port = ipmi.port;
  if (ipmi.username) facts.username = ipmi.username;
  if (ipmi.password) facts.password = ipmi.password;
  if (s.api?.address) facts.apiAddress = s.api.address;
  return Object.keys(facts).length > 0 ? facts : undefined;
}

/**
 * The facts a wipe needs about one machine. Specs in order of preference (e.g. the bare-metal
 * provider's BMCConfiguration from `infra-provider:<id>`, then Omni's BMCConfig); the first one that
 * holds any BMC data is used, whole (fields of different specs are never mixed).
 */
export function machineFactsFromBmc(
  machineId: string,
  providerId: string,
  ...specs: Array<AnyBmcSpec | null | undefined>
): MachineFacts {
  for (const spec of specs) {
    const bmc = bmcFactsFromSpec(spec);
    if (bmc) return { machineId, providerId, bmc };
  }
  return { machineId, providerId };
}
