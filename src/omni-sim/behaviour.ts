// What the simulated Omni does differently by Omni version at its gateway, in one place. Each entry
// says where it comes from: a recording of a real Omni (the team's shared omni-recordings, 1.3.4 and
// 1.9.3), or Omni's and COSI's sources at the release tags (for the version where it changed).

import { stringify } from 'yaml';
import type { Resource } from '../omni-api/resource.js';
import { newMetadata, NS_EPHEMERAL, T } from '../omni-api/resource.js';
import { decodeSpec, encodeSpec } from '../omni-api/specs/codec.js';
import { SysVersionSpec } from '../omni-api/specs/messages.js';
import { specSchemaForType } from '../omni-api/specs/specs.js';
import { specToPlain } from './scenario/plain.js';
import { type FieldSchema, type MessageSchema } from '../omni-api/specs/schema.js';
import { atLeast, parseVersion, type OmniVersion } from './version.js';

export interface GatewayBehaviour {
  /** Omni >= 1.8 serves Teardown and TeardownAndDestroy; older builds have no route (404 code 5; recorded on 1.3.4). */
  teardownRoutes: boolean;
  /**
   * Before 1.6.5 (COSI runtime before 1.14.1) the State server reads `req.Options.*` of a Watch
   * without a nil check: a Watch without `options` is a nil dereference that Omni's panic recovery
   * answers with HTTP 500, code Internal (recorded on 1.3.4; 1.9.3 takes it as `options: {}`).
   */
  watchWithoutOptionsPanics: boolean;
  /**
   * protobuf-go starts its errors with "proto:" and then, chosen per built binary (a hash of the
   * executable) to discourage matching on the text, a space or a no-break space (U+00A0). Known for
   * the builds the recordings were made with: 1.3.4 a space, 1.9.3 the no-break space; a space for
   * every other version (a release build may differ).
   */
  protoErrorPrefix: string;
  /**
   * SysVersion's `backend_api_version`: Omni's internal/version.API, 2 from 1.4.5 on (recorded: 1 on 1.3.4, 2 on
   * 1.9.3).
   */
  backendApiVersion: number;
}

const NBSP_BUILDS: ReadonlySet<string> = new Set(['1.9.3']);

export function gatewayBehaviour(version: OmniVersion | string): GatewayBehaviour {
  const v = typeof version === 'string' ? parseVersion(version) : version;
  return {
    teardownRoutes: atLeast(v, '1.8'),
    watchWithoutOptionsPanics: !atLeast(v, '1.6.5'),
    protoErrorPrefix: NBSP_BUILDS.has(`${v.major}.${v.minor}.${v.patch}`) ? 'proto:\u00a0' : 'proto: ',
    backendApiVersion: atLeast(v, '1.4.5') ? 2 : 1,
  };
}

// ---------------------------------------------------------------------------------------------
// yaml_spec as the version renders it

/**
 * Spec fields newer than Omni 0.50, by message and the release that added them (Omni's
 * client/api/omni/specs/*.proto at the release tags). An older Omni does not know them: its
 * yaml_spec has no such key (recorded: 1.3.4 renders no `poweroffrequestid`, neither 1.3.4 nor 1.9.3
 * an InfraProviderStatus `version`), and bytes it is sent for them are kept as unknown fields.
 */
export const SPEC_FIELDS_SINCE: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'specs.InfraProviderStatusSpec': { version: '1.10' },
  'specs.InfraMachineSpec': { power_off_request_id: '1.8' },
  'specs.InfraMachineStatusSpec': { last_power_off_id: '1.8' },
  'specs.MachineSpec': { use_grpc_tunnel: '1.0' },
};

const pruned = new Map<string, WeakMap<MessageSchema<unknown>, MessageSchema<unknown>>>();

/** The message as Omni `version` has it: the fields it does not know left out, in nested messages too. */
export function specSchemaAt(schema: MessageSchema<unknown>, version: OmniVersion): MessageSchema<unknown> {
  const key = `${version.major}.${version.minor}.${version.patch}`;
  let cache = pruned.get(key);
  if (!cache) pruned.set(key, (cache = new WeakMap()));
  const hit = cache.get(schema);
  if (hit) return hit;
  const since = SPEC_FIELDS_SINCE[schema.name] ?? {};
  const fields = schema.fields
    .filter((f) => since[f.name] === undefined || atLeast(version, since[f.name] as string))
    .map((f): FieldSchema => {
      const sub = f.message;
      return sub ? { ...f, message: () => specSchemaAt(sub(), version) } : f;
    });
  const out: MessageSchema<unknown> = { name: schema.name, fields };
  cache.set(schema, out);
  return out;
}

/**
 * The yaml_spec Omni `version` renders for these bytes (omnictl's keys, 4-space indent), or undefined
 * for a type without a schema here; without a version, as `omnictl get -o yaml` of the newest Omni
 * shows it (every field of the schema). Unknown fields are not shown (Go's YAML encoder does not show
 * them either). Throws SpecError when the bytes do not decode.
 */
export function renderYamlSpec(type: string, bytes: Uint8Array, version?: OmniVersion): string | undefined {
  const full = specSchemaForType(type);
  if (!full) return undefined;
  const schema = version ? specSchemaAt(full, version) : full;
  return stringify(specToPlain(schema, decodeSpec(schema, bytes).value, 'omnictl'), { indent: 4, indentSeq: true });
}

/** The ID of Omni's one SysVersion. */
export const SYS_VERSION_ID = 'current';

/**
 * Omni's `SysVersions.system.sidero.dev` `ephemeral/current`, as that version serves it: field 1 is
 * the build's git tag (`git describe --tag`, so `v1.3.4`), whatever spelling the scenario used.
 */
export function sysVersionResource(omniVersion: string, nowMs: number): Resource {
  const v = parseVersion(omniVersion);
  const tag = `v${v.major}.${v.minor}.${v.patch}${v.prerelease ? `-${v.prerelease}` : ''}`;
  const at = new Date(nowMs).toISOString();
  return {
    metadata: newMetadata(
      { namespace: NS_EPHEMERAL, type: T.SysVersion, id: SYS_VERSION_ID },
      { version: '1', created: at, updated: at },
    ),
    spec: {
      protoSpec: encodeSpec(SysVersionSpec, {
        backend_version: tag,
        instance_name: 'omni-sim',
        backend_api_version: gatewayBehaviour(v).backendApiVersion,
      }),
    },
  };
}
