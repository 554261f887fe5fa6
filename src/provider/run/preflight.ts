// Preflight (issue item 1): the key is the provider's, the API answers, the provider is registered,
// and no live provider with this ID is running (design rule 7). Also reads Omni's version.

import type { Resource } from '../../omni-api/resource.js';
import { NS_EPHEMERAL, NS_INFRA_PROVIDER_EPHEMERAL, T } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { OmniError } from '../../omni-api/errors.js';
import { hasCode } from '../../omni-client/errors.js';
import { InfraProviderHealthStatusSpec } from '../../omni-api/specs/messages.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import { PreflightError, UsageError } from '../../exit-codes.js';
import { STUB_MARKER } from '../plan/facts.js';
import { backendVersionOf } from '../read/snapshot.js';

/** A heartbeat younger than this, not written by us, means the provider is alive (design rule 7). */
export const LIVE_HEARTBEAT_MS = 60_000;

export interface PreflightOptions {
  state: State;
  /** `--id`, exactly as given. */
  providerId: string;
  /** `<id>` of the key's `infra-provider:<id>` name. */
  keyProviderId: string;
  /** The key's name, for messages (never the key). */
  keyName: string;
  force: boolean;
  /** Wall clock as Omni sees it. */
  now: () => number;
  signal?: AbortSignal;
}

export interface PreflightResult {
  omniVersion?: string;
  /** The heartbeat found, and whose it is. */
  heartbeat?: { ageMs: number; ours: boolean; error: string };
  /** A live provider was detected and --force overrode the refusal. */
  forced: boolean;
}

export async function preflight(o: PreflightOptions): Promise<PreflightResult> {
  if (o.keyProviderId !== o.providerId) {
    throw new UsageError(
      `the key is for ${JSON.stringify(o.keyName)}, not for infra-provider:${o.providerId}: --id must match the ` +
        `key's provider ID exactly (IDs are case-sensitive). ` +
        `Use the key printed by \`omnictl infraprovider create ${o.providerId}\`, or pass --id ${o.keyProviderId}.`,
    );
  }
  let omniVersion: string | undefined;
  try {
    const sys = await o.state.get({ namespace: NS_EPHEMERAL, type: T.SysVersion, id: 'current' }, { signal: o.signal });
    omniVersion = backendVersionOf(sys);
  } catch (err) {
    if (isNotRegistered(err)) throw notRegistered(o.providerId, err as OmniError);
    // An older Omni, or a SysVersion this account cannot read: go on without the version.
    if (!(err instanceof OmniError) || err.code === 'OMNI_UNAUTHENTICATED') throw err;
  }
  // A call into the provider namespaces: Omni refuses every one when the provider is not registered.
  let health: Resource | undefined;
  try {
    health = await getIfExists(
      o.state,
      { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: o.providerId },
      { signal: o.signal },
    );
  } catch (err) {
    if (isNotRegistered(err)) throw notRegistered(o.providerId, err as OmniError);
    throw err;
  }
  const result: PreflightResult = { ...(omniVersion ? { omniVersion } : {}), forced: false };
  if (!health) return result;
  const hb = heartbeatOf(health, o.now());
  if (!hb) {
    // A heartbeat we cannot read may well be a live provider's (a newer spec, another writer): fail
    // closed, as for a fresh one; ignoring it would let the run fight whoever writes it.
    if (!o.force) {
      throw new PreflightError(
        'STUB_LIVE_PROVIDER',
        `the heartbeat (ProviderHealthStatus) of provider ${o.providerId} could not be read (its spec does not ` +
          `decode), so a live provider cannot be ruled out. ` +
          'Make sure the provider is stopped, then pass --force.',
      );
    }
    result.forced = true;
    return result;
  }
  result.heartbeat = hb;
  if (!hb.ours && hb.ageMs < LIVE_HEARTBEAT_MS) {
    if (!o.force) {
      throw new PreflightError(
        'STUB_LIVE_PROVIDER',
        `a live provider with ID ${o.providerId} sent a heartbeat ${Math.round(hb.ageMs / 1000)} s ago (not written ` +
          `by stub-provider). ` +
          ('It would put its finalizers back and fight this run. Stop it first, or pass --force if you are sure it ' +
            'is ' +
            'gone.'),
      );
    }
    result.forced = true;
  }
  return result;
}

/** The heartbeat's age (by Omni's clock) and whether stub-provider wrote it. */
export function heartbeatOf(
  health: Resource,
  nowMs: number,
): { ageMs: number; ours: boolean; error: string } | undefined {
  try {
    const spec = decodeSpec(InfraProviderHealthStatusSpec, health.spec.protoSpec).value;
    const at = spec.last_heartbeat_timestamp ? Date.parse(spec.last_heartbeat_timestamp) : NaN;
    if (!Number.isFinite(at))
      return { ageMs: Number.POSITIVE_INFINITY, ours: spec.error.startsWith(STUB_MARKER), error: spec.error };
    return { ageMs: Math.max(0, nowMs - at), ours: spec.error.startsWith(STUB_MARKER), error: spec.error };
  } catch {
    return undefined;
  }
}

function isNotRegistered(err: unknown): boolean {
  return hasCode(err, 'OMNI_PERMISSION_DENIED') && /not registered in the system/i.test(err.omniMessage);
}

function notRegistered(id: string, cause: OmniError): PreflightError {
  return new PreflightError(
    'STUB_NOT_REGISTERED',
    `Omni says infra provider ${JSON.stringify(id)} is not registered. Its registration (and with it the service ` +
      `account and this key) was deleted. ` +
      `To release its machines, an admin re-creates the registration with the same ID and hands over the new key: ` +
      `\`omnictl infraprovider create ${id}\`, then run stub-provider with that key. ` +
      ('On Omni 1.4 and later this is usually not needed: once the registration is deleted, Omni strips the ' +
        "provider's finalizers and cleans up by itself."),
    { cause },
  );
}
