// src/omni-sim/scenario: what the simulated Omni starts from and what it writes out: scenario files
// and dumps (this file), one resource document read and written (resource-doc.ts), specs as plain
// YAML objects (plain.ts), a dump served as the provider's account sees it (dump-state.ts),
// omnictl-style key pairs (keys.ts), large generated fleets (generate.ts).
//
// Scenario files of the simulated Omni (docs/operator-guide.md 'Rehearsing on the simulated Omni'), read
// strictly: every error names the YAML document (0-based) and the key. Two shapes, also mixed in one
// multi-document file:
//   - the scenario shape: `omni: {version}`, `identities: [...]`, `resources: [...]`, `faults: {...}`;
//   - documents as `omnictl get ... -o yaml` prints them (docs/omni-wire.md 6): top-level
//     `metadata` + `spec`, version a bare number, spec keys in omnictl's spelling.
// A resource's spec is a map (`spec:`, for the types src/omni-api/specs/specs.ts knows; proto or omnictl
// key spelling), or `proto_spec:` (standard base64, any type), plus `yaml_spec:` for opaque types
// (resource-doc.ts reads and writes one resource; this file the documents around them).
// dumpScenario writes the scenario shape so that parse(dump(parse(x))) equals parse(x).

import { parseAllDocuments, parseDocument, stringify } from 'yaml';
import { InputFileError, readBoundedFile, SCENARIO_FILE_MAX_BYTES } from '../../omni-api/bounded-file.js';
import type { Resource } from '../../omni-api/resource.js';
import { NS_EPHEMERAL, T } from '../../omni-api/resource.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { SysVersionSpec } from '../../omni-api/specs/messages.js';
import { ROLE_RANK, type Role } from '../api.js';
import { type FaultConfig, faultConfigFromPlain, faultConfigToPlain } from '../gateway/fault-config.js';
import { parseVersion } from '../version.js';
import { roleMissingIn } from '../access/roles.js';
import { type DocReader, isMap, parseResource, type Plain, resourceToPlain } from './resource-doc.js';

/** Used when a file names no Omni version (e.g. a bare `omnictl get -o yaml` dump). */
export const DEFAULT_OMNI_VERSION = '1.3.4';

export interface ScenarioIdentity {
  name: string;
  role: Role;
  /** Armored public keys from the file; none = the sim generates a key pair. */
  publicKeys: string[];
}

export interface Scenario {
  omniVersion: string;
  /**
   * The file's header named the version (`omni: {version}`; a sim's dump always does), rather than
   * a SysVersion or the default: what `plan --from-dump` may serve as the dump's SysVersion.
   */
  omniVersionFromHeader?: boolean;
  identities: ScenarioIdentity[];
  /** Sorted by namespace, type, ID. */
  resources: Resource[];
  faults: FaultConfig;
}

export class ScenarioError extends Error {
  readonly code = 'SIM_SCENARIO_INVALID';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ScenarioError';
  }
}

const PROVIDER_PREFIX = 'infra-provider:';
const HEADER_KEYS = ['omni', 'identities', 'resources', 'faults'];
const ROLES = Object.keys(ROLE_RANK) as Role[];

/** bigint (YAML parsed with intAsBigInt, so uint64 specs survive) back to number where exact. */
function normalize(v: unknown): unknown {
  if (typeof v === 'bigint')
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  if (Array.isArray(v)) return v.map(normalize);
  if (isMap(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normalize(x)]));
  return v;
}

class Ctx implements DocReader {
  constructor(
    readonly source: string,
    readonly doc: number,
  ) {}
  fail(path: string, why: string): never {
    throw new ScenarioError(`${this.source}: document ${this.doc}: ${path}: ${why}`);
  }
  onlyKeys(obj: Plain, allowed: string[], path: string): void {
    for (const k of Object.keys(obj))
      if (!allowed.includes(k))
        this.fail(`${path}${path ? '.' : ''}${k}`, `unknown key (known: ${allowed.join(', ')})`);
  }
  str(v: unknown, path: string, opts: { required?: boolean; fallback?: string } = {}): string {
    if (v === undefined || v === null) {
      if (opts.required) this.fail(path, 'required');
      return opts.fallback ?? '';
    }
    if (typeof v !== 'string')
      this.fail(path, `expected a string, got ${JSON.stringify(typeof v === 'bigint' ? String(v) : v)}`);
    return v;
  }
}

function parseIdentity(ctx: Ctx, raw: unknown, path: string): ScenarioIdentity {
  if (!isMap(raw)) return ctx.fail(path, 'expected a map with name, role, public_key');
  ctx.onlyKeys(raw, ['name', 'role', 'public_key', 'public_keys'], path);
  const name = ctx.str(raw['name'], `${path}.name`, { required: true });
  if (name === '' || /\s/.test(name)) ctx.fail(`${path}.name`, 'must be non-empty without spaces');
  const isProvider = name.startsWith(PROVIDER_PREFIX);
  if (isProvider && name.length === PROVIDER_PREFIX.length)
    ctx.fail(`${path}.name`, 'provider ID missing after infra-provider:');
  const roleText = ctx.str(raw['role'], `${path}.role`, { fallback: isProvider ? 'InfraProvider' : '' });
  if (roleText === '') ctx.fail(`${path}.role`, `required for ${name} (one of ${ROLES.join(', ')})`);
  if (!ROLES.includes(roleText as Role))
    ctx.fail(`${path}.role`, `unknown role ${JSON.stringify(roleText)} (one of ${ROLES.join(', ')})`);
  // Omni: role InfraProvider is mandatory for `infra-provider:` accounts and only allowed for them.
  if (isProvider !== (roleText === 'InfraProvider'))
    ctx.fail(`${path}.role`, 'role InfraProvider goes with names infra-provider:<id> and only with them');
  const keys: string[] = [];
  if (raw['public_key'] !== undefined && raw['public_key'] !== null)
    keys.push(ctx.str(raw['public_key'], `${path}.public_key`));
  if (raw['public_keys'] !== undefined && raw['public_keys'] !== null) {
    if (!Array.isArray(raw['public_keys'])) ctx.fail(`${path}.public_keys`, 'expected a list of armored keys');
    raw['public_keys'].forEach((k, i) => keys.push(ctx.str(k, `${path}.public_keys[${i}]`)));
  }
  keys.forEach((k, i) => {
    if (!k.includes('-----BEGIN PGP PUBLIC KEY BLOCK-----'))
      ctx.fail(`${path}.public_key${keys.length > 1 ? `s[${i}]` : ''}`, 'expected an armored OpenPGP public key');
  });
  return { name, role: roleText as Role, publicKeys: keys };
}

const resourceKey = (r: Resource) => `${r.metadata.namespace}\u0000${r.metadata.type}\u0000${r.metadata.id}`;

/**
 * Faults given apart from a scenario (`stub-provider sim --faults`): a YAML or JSON map with the keys
 * of a scenario's `faults:`, e.g. `{throttle: {infra_provider: {bytes_per_second: 20000, burst: 20000}}}`.
 */
export function parseFaults(text: string, source: string): FaultConfig {
  const doc = parseDocument(text, { intAsBigInt: true, uniqueKeys: true });
  const e = doc.errors[0];
  if (e) throw new ScenarioError(`${source}: ${e.message}`);
  try {
    return faultConfigFromPlain(normalize(doc.toJS({ maxAliasCount: 100 })), source);
  } catch (x) {
    throw new ScenarioError((x as Error).message, { cause: x });
  }
}

/** Parses a scenario (either shape, one or more YAML documents). `source` names the file in errors. */
export function parseScenario(text: string, source = 'scenario'): Scenario {
  const { header, resources } = readDocuments(text, source);
  const parts = header ? parseHeader(header.ctx, header.raw, resources) : { faults: {} };
  return completeScenario(source, parts, resources);
}

/** What a scenario header gives (each part optional but the faults). */
interface HeaderParts {
  omniVersion?: string;
  identities?: ScenarioIdentity[];
  faults: FaultConfig;
}

/** Each document is a resource (omnictl's shape) or the one scenario header, kept for parseHeader. */
function readDocuments(text: string, source: string): { header?: { ctx: Ctx; raw: Plain }; resources: Resource[] } {
  const docs = parseAllDocuments(text, { intAsBigInt: true, uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  let header: { ctx: Ctx; raw: Plain } | undefined;
  const resources: Resource[] = [];
  list.forEach((doc, i) => {
    const ctx: Ctx = new Ctx(source, i);
    const e = doc.errors[0];
    if (e) ctx.fail('(yaml)', e.message);
    const raw = normalize(doc.toJS({ maxAliasCount: 100 }));
    if (raw === null || raw === undefined) return;
    if (!isMap(raw)) ctx.fail('(document)', 'expected a map');
    if ('metadata' in raw) {
      resources.push(parseResource(ctx, raw, '', true));
      return;
    }
    ctx.onlyKeys(raw, HEADER_KEYS, '');
    if (header) ctx.fail('(document)', `a second scenario header (the first is document ${header.ctx.doc})`);
    header = { ctx, raw };
  });
  return { ...(header ? { header } : {}), resources };
}

/** The header's `omni`, `identities` and `faults`; its `resources` are added to `resources`. */
function parseHeader(ctx: Ctx, raw: Plain, resources: Resource[]): HeaderParts {
  const out: HeaderParts = { faults: {} };
  const omni = raw['omni'];
  if (omni !== undefined && omni !== null) {
    if (!isMap(omni)) ctx.fail('omni', 'expected a map with version');
    ctx.onlyKeys(omni, ['version'], 'omni');
    if (omni['version'] !== undefined) {
      if (typeof omni['version'] !== 'string')
        ctx.fail('omni.version', 'expected a quoted string such as "1.3.4" (1.10 unquoted is the number 1.1)');
      try {
        parseVersion(omni['version']);
      } catch (e) {
        ctx.fail('omni.version', (e as Error).message);
      }
      out.omniVersion = omni['version'];
    }
  }
  const ids = raw['identities'];
  if (ids !== undefined && ids !== null) {
    if (!Array.isArray(ids)) ctx.fail('identities', 'expected a list');
    const parsed = ids.map((x, i) => parseIdentity(ctx, x, `identities[${i}]`));
    out.identities = parsed;
    const seen = new Set<string>();
    parsed.forEach((x, i) => {
      if (seen.has(x.name)) ctx.fail(`identities[${i}].name`, `duplicate identity ${x.name}`);
      seen.add(x.name);
    });
  }
  const rs = raw['resources'];
  if (rs !== undefined && rs !== null) {
    if (!Array.isArray(rs)) ctx.fail('resources', 'expected a list');
    rs.forEach((x, i) => resources.push(parseResource(ctx, x, `resources[${i}]`, false)));
  }
  try {
    out.faults = faultConfigFromPlain(raw['faults'], 'faults');
  } catch (e) {
    ctx.fail('faults', (e as Error).message.replace(/^faults[.:]\s*/, ''));
  }
  return out;
}

/** The version and identities a file left out, from its resources; every resource once, sorted. */
function completeScenario(source: string, header: HeaderParts, resources: Resource[]): Scenario {
  const fromHeader = header.omniVersion !== undefined;
  // No version in a header: a dump's SysVersion (`omnictl get sysversions -o yaml`) says which Omni it came from.
  const omniVersion =
    header.omniVersion ?? resources.map(sysVersionOf).find((v) => v !== undefined) ?? DEFAULT_OMNI_VERSION;
  header.identities?.forEach((x, i) => {
    const missing = roleMissingIn(x.role, omniVersion);
    if (missing) throw new ScenarioError(`${source}: identities[${i}].role: ${missing}, not ${omniVersion}`);
  });
  const seen = new Set<string>();
  for (const r of resources) {
    const k = resourceKey(r);
    if (seen.has(k))
      throw new ScenarioError(
        `${source}: resource ${r.metadata.namespace}/${r.metadata.type}/${r.metadata.id} is given twice`,
      );
    seen.add(k);
  }
  resources.sort((a, b) => (resourceKey(a) < resourceKey(b) ? -1 : resourceKey(a) > resourceKey(b) ? 1 : 0));
  // No identities listed: one provider identity per registered InfraProvider, so a replayed dump is usable.
  const identities =
    header.identities ??
    resources
      .filter((r) => r.metadata.type === T.InfraProvider)
      .map((r) => ({ name: `${PROVIDER_PREFIX}${r.metadata.id}`, role: 'InfraProvider' as Role, publicKeys: [] }));
  const faults = header.faults;
  return { omniVersion, ...(fromHeader ? { omniVersionFromHeader: true } : {}), identities, resources, faults };
}

/** The Omni version a SysVersion resource (`ephemeral/current`) names, e.g. `v1.9.3`; undefined for anything else. */
export function sysVersionOf(r: Resource): string | undefined {
  if (r.metadata.namespace !== NS_EPHEMERAL || r.metadata.type !== T.SysVersion) return undefined;
  try {
    const v = decodeSpec(SysVersionSpec, r.spec.protoSpec).value.backend_version.trim();
    parseVersion(v);
    return v;
  } catch {
    return undefined;
  }
}

/** A scenario or dump file, read within SCENARIO_FILE_MAX_BYTES; `what`: the flag that named it, for messages. */
export async function loadScenarioFile(path: string, what = '--scenario'): Promise<Scenario> {
  let text: string;
  try {
    text = readBoundedFile(path, { what, maxBytes: SCENARIO_FILE_MAX_BYTES });
  } catch (e) {
    if (e instanceof InputFileError) throw e;
    throw new ScenarioError(`cannot read scenario ${path}: ${(e as Error).message}`, { cause: e });
  }
  return parseScenario(text, path);
}

/** The scenario shape of a state (identities without generated keys: those are made anew on load). */
export function dumpScenario(s: Scenario): string {
  const doc: Plain = {
    omni: { version: s.omniVersion },
    identities: s.identities.map((x) => ({
      name: x.name,
      role: x.role,
      ...(x.publicKeys.length === 1
        ? { public_key: x.publicKeys[0] }
        : x.publicKeys.length > 1
          ? { public_keys: [...x.publicKeys] }
          : {}),
    })),
    resources: s.resources.map(resourceToPlain),
  };
  const faults = faultConfigToPlain(s.faults);
  if (Object.keys(faults).length > 0) doc['faults'] = faults;
  return stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false });
}
