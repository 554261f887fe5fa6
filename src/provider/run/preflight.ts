// Preflight: the key is the provider's, the API answers, the provider is registered,
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
/** How often a run reads the heartbeat of another run it waits for (that run beats every 30 s). */
const OTHER_RUN_POLL_MS = 5_000;

/** The run that wrote a heartbeat (stub-provider's, design rule 7), and that it ended. */
export const ANNOTATION_RUN = 'stub-provider.sidero.dev/run';
export const ANNOTATION_RUN_ENDED = 'stub-provider.sidero.dev/run-ended';

/** What preflight found of another stub-provider run of the same provider, and what this run did about it. */
export interface ConcurrentRun {
  runId: string;
  /** Its heartbeat's age when first read. */
  ageMs: number;
  /** How long this run waited for that heartbeat to go stale (it did). */
  waitedMs?: number;
  /** --force: not waited for. */
  forced?: boolean;
}

/** A heartbeat as read: its age by Omni's clock, whether stub-provider wrote it, which run, whether it ended. */
export interface HeartbeatSeen {
  ageMs: number;
  /** Its timestamp (Omni's clock, ms); NaN when it has none. */
  atMs: number;
  ours: boolean;
  error: string;
  runId?: string;
  ended?: boolean;
}

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
  /**
   * A run of the whole provider: another run's live heartbeat is waited for (until it goes stale:
   * go on; refreshed: STUB_CONCURRENT_RUN), unless --force. Without it (`plan`, `--machine`) it is reported.
   */
  waitForOtherRun?: {
    log?: { info(o: object, msg: string): void };
    pollMs?: number;
    liveMs?: number;
    sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  };
}

export interface PreflightResult {
  omniVersion?: string;
  /** The heartbeat found, and whose it is. */
  heartbeat?: HeartbeatSeen;
  /** A live provider was detected and --force overrode the refusal. */
  forced: boolean;
  /** Another stub-provider run's live heartbeat was found (design rule 7). */
  concurrentRun?: ConcurrentRun;
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
  if (hb.ours && !hb.ended && hb.ageMs < (o.waitForOtherRun?.liveMs ?? LIVE_HEARTBEAT_MS)) {
    result.concurrentRun = { runId: hb.runId ?? 'unknown', ageMs: Math.round(hb.ageMs) };
    if (o.force) result.concurrentRun.forced = true;
    else if (o.waitForOtherRun) result.concurrentRun.waitedMs = await waitForOtherRun(o, hb, o.waitForOtherRun);
  }
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

/**
 * The heartbeat's age (by Omni's clock), whether stub-provider wrote it (the marker of its error
 * text: a returning provider's library rewrites the spec and keeps the annotations), by which run
 * and whether that run ended.
 */
export function heartbeatOf(health: Resource, nowMs: number): HeartbeatSeen | undefined {
  try {
    const spec = decodeSpec(InfraProviderHealthStatusSpec, health.spec.protoSpec).value;
    const at = spec.last_heartbeat_timestamp ? Date.parse(spec.last_heartbeat_timestamp) : NaN;
    const ours = spec.error.startsWith(STUB_MARKER);
    const runId = ours ? health.metadata.annotations[ANNOTATION_RUN] : undefined;
    return {
      ageMs: Number.isFinite(at) ? Math.max(0, nowMs - at) : Number.POSITIVE_INFINITY,
      atMs: at,
      ours,
      error: spec.error,
      ...(runId !== undefined ? { runId } : {}),
      ...(ours && Object.hasOwn(health.metadata.annotations, ANNOTATION_RUN_ENDED) ? { ended: true } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Design rule 7, another run of the stub: nothing is written while its heartbeat is live. It is read
 * again every few seconds until it is older than the live window (that run crashed or was killed:
 * go on, returning how long this took), ends or goes (go on), or shows a newer beat (that run is
 * alive: STUB_CONCURRENT_RUN, exit 3). Bounded by the live window and one poll.
 */
async function waitForOtherRun(
  o: PreflightOptions,
  first: HeartbeatSeen,
  w: NonNullable<PreflightOptions['waitForOtherRun']>,
): Promise<number> {
  const liveMs = w.liveMs ?? LIVE_HEARTBEAT_MS;
  const sleep = w.sleep ?? sleepFor;
  const startedAt = o.now();
  const beatAt = Number.isFinite(first.atMs) ? first.atMs : startedAt - liveMs;
  const runId = first.runId ?? 'unknown';
  w.log?.info(
    { providerId: o.providerId, otherRun: runId, heartbeatAgeMs: Math.round(first.ageMs) },
    `another stub-provider run (${runId}) sent a heartbeat ${Math.round(first.ageMs / 1000)} s ago: waiting up to ` +
      `${Math.ceil((liveMs - first.ageMs) / 1000)} s for it to go stale before writing anything`,
  );
  const p = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: o.providerId };
  for (;;) {
    const left = beatAt + liveMs - o.now();
    if (left <= 0) return Math.round(o.now() - startedAt);
    await sleep(Math.min(w.pollMs ?? OTHER_RUN_POLL_MS, left), o.signal);
    const cur = await getIfExists(o.state, p, { signal: o.signal });
    const hb = cur && heartbeatOf(cur, o.now());
    if (!hb || hb.ended) return Math.round(o.now() - startedAt);
    if (hb.atMs > first.atMs) throw concurrentRun(o.providerId, hb, o.now() - startedAt);
  }
}

/** Another run of the stub is alive: it sent a heartbeat while this run waited, or wrote its heartbeat first. */
export function concurrentRun(providerId: string, hb: HeartbeatSeen, waitedMs?: number): PreflightError {
  const waited = waitedMs !== undefined ? ` (this run waited ${Math.round(waitedMs / 1000)} s)` : '';
  return new PreflightError(
    'STUB_CONCURRENT_RUN',
    `another stub-provider run (${hb.runId ?? 'unknown'}) of provider ${providerId} is under way: it sent a ` +
      `heartbeat ${Math.round(hb.ageMs / 1000)} s ago${waited}. Two runs at once would each wipe and release the ` +
      `same machines. Nothing was written. Let it finish (or stop it) and run again; --force takes over from it ` +
      `(it then stops starting anything at its next heartbeat)`,
  );
}

function sleepFor(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
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
