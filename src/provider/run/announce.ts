// Announce stub mode (docs/omni-lifecycle.md 7.1): upsert the ProviderStatus keeping its labels
// (above all the static label, docs/omni-lifecycle.md 1) and schema, and send ProviderHealthStatus
// heartbeats every 30 s whose error says the provider is being decommissioned. Everything written
// here starts with `stub-provider`, so a re-run recognises its own heartbeat (design rule 7).

import type { Logger } from 'pino';
import type { Resource } from '../../omni-api/resource.js';
import {
  LABEL_IS_STATIC_INFRA_PROVIDER,
  NS_INFRA_PROVIDER,
  NS_INFRA_PROVIDER_EPHEMERAL,
  T,
  newMetadata,
} from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { hasCode } from '../../omni-client/errors.js';
import { InfraProviderHealthStatusSpec, InfraProviderStatusSpec } from '../../omni-api/specs/messages.js';
import { encodeSpec, updateSpec, decodeSpec } from '../../omni-api/specs/codec.js';
import { PreflightError } from '../../exit-codes.js';
import { HEALTH_STATUS_CONTROLLER } from '../profile.js';
import { STUB_MARKER } from '../plan/facts.js';
import { LIVE_HEARTBEAT_MS, heartbeatOf } from './preflight.js';

export const HEARTBEAT_INTERVAL_MS = 30_000;

export function stubVersionText(version: string): string {
  return `${STUB_MARKER} ${version}, decommissioning`;
}

export function heartbeatError(providerId: string): string {
  return (
    `${STUB_MARKER}: provider ${providerId} is being decommissioned; it releases machines being deleted and ` +
    `refuses new machines`
  );
}

export interface AnnounceContext {
  state: State;
  providerId: string;
  version: string;
  logger: Logger;
  signal?: AbortSignal;
}

/** Upserts `ProviderStatus/<id>`. Returns whether it wrote. */
export async function announceProviderStatus(
  ctx: AnnounceContext,
  existing: Resource | undefined,
  isStatic: boolean,
): Promise<boolean> {
  const { state, providerId } = ctx;
  const text = stubVersionText(ctx.version);
  let current = existing;
  for (let attempt = 1; attempt <= 4; attempt++) {
    if (!current) {
      const md = newMetadata(
        { namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: providerId },
        { labels: isStatic ? { [LABEL_IS_STATIC_INFRA_PROVIDER]: '' } : {} },
      );
      const spec = encodeSpec(InfraProviderStatusSpec, {
        schema: '',
        name: providerId,
        description: `${text}: releases what is being deleted, accepts no new machines`,
        icon: '',
        version: text,
      });
      try {
        await state.create({ metadata: md, spec: { protoSpec: spec } }, { owner: '', signal: ctx.signal });
        return true;
      } catch (err) {
        if (!hasCode(err, 'OMNI_ALREADY_EXISTS') || attempt === 4) throw err;
        current = await state.get(md, { signal: ctx.signal });
        continue;
      }
    }
    const old = decodeSpec(InfraProviderStatusSpec, current.spec.protoSpec).value;
    if (old.version === text && old.description.startsWith(text)) return false;
    const next: Resource = {
      metadata: {
        ...current.metadata,
        labels: { ...current.metadata.labels },
        annotations: { ...current.metadata.annotations },
        finalizers: [...current.metadata.finalizers],
      },
      spec: {
        protoSpec: updateSpec(InfraProviderStatusSpec, current.spec.protoSpec, {
          description: `${text}: releases what is being deleted, accepts no new machines`,
          version: text,
        }),
      },
    };
    if (isStatic && !Object.hasOwn(next.metadata.labels, LABEL_IS_STATIC_INFRA_PROVIDER))
      next.metadata.labels[LABEL_IS_STATIC_INFRA_PROVIDER] = '';
    try {
      await state.update(next, { owner: current.metadata.owner, signal: ctx.signal, before: current });
      return true;
    } catch (err) {
      if (hasCode(err, 'OMNI_NOT_FOUND')) {
        current = undefined;
        continue;
      }
      if (!hasCode(err, 'OMNI_FAILED_PRECONDITION') || attempt === 4) throw err;
      current = await state.get(current.metadata, { signal: ctx.signal });
    }
  }
  return false;
}

export interface Timers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export const realTimers: Timers = {
  setInterval: (fn, ms) => {
    const h = setInterval(fn, ms);
    h.unref();
    return h;
  },
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
};

export interface HeartbeatOptions extends AnnounceContext {
  /** Wall-clock milliseconds as Omni sees them (local clock plus the adopted server offset). */
  now: () => number;
  timers?: Timers;
  intervalMs?: number;
  /** --force: keep going although another writer's heartbeat shows up. */
  force?: boolean;
  /** Called when a beat on the interval finds a live provider's heartbeat (the beat wrote nothing). */
  onLiveProvider?: (err: PreflightError) => void;
}

/**
 * Design rule 7 during the run: the heartbeat as read now is a live provider's when stub-provider did
 * not write it (no marker, or unreadable) and it is younger than 60 s or newer than our own last beat
 * (`sinceMs`). Returns the error that stops the run, or undefined.
 */
export function liveProviderIn(
  current: Resource | undefined,
  providerId: string,
  nowMs: number,
  sinceMs?: number,
): PreflightError | undefined {
  if (!current) return undefined;
  const hb = heartbeatOf(current, nowMs);
  if (hb?.ours) return undefined;
  const at = hb ? nowMs - hb.ageMs : undefined;
  if (hb && !(hb.ageMs < LIVE_HEARTBEAT_MS || (sinceMs !== undefined && at !== undefined && at > sinceMs)))
    return undefined;
  return new PreflightError(
    'STUB_LIVE_PROVIDER',
    `a live provider with ID ${providerId} came back during the run: its heartbeat ` +
      `${hb ? `of ${Math.round(hb.ageMs / 1000)} s ago` : '(unreadable)'} was not written by stub-provider. ` +
      ('The run stopped before deregistering it or overwriting its heartbeat. Let the provider finish its machines, ' +
        'or stop it and run again (--force if you are sure it is gone).'),
  );
}

/** `ProviderHealthStatus/<id>` heartbeats; owned like the library's, so a returning provider adopts it. */
export class Heartbeat {
  private handle: unknown;
  private inFlight: Promise<void> | undefined;
  private readonly timers: Timers;
  /** The timestamp our last beat wrote (Omni's clock). */
  private lastBeatMs: number | undefined;
  beats = 0;

  constructor(private readonly o: HeartbeatOptions) {
    this.timers = o.timers ?? realTimers;
  }

  async start(): Promise<void> {
    await this.beat();
    this.handle = this.timers.setInterval(() => {
      if (this.inFlight) return;
      this.inFlight = this.beat()
        .catch((err: unknown) => {
          if (err instanceof PreflightError) {
            this.stopInterval();
            this.o.onLiveProvider?.(err);
            return;
          }
          this.o.logger.warn({ err: (err as Error).message }, 'heartbeat failed; retrying at the next interval');
        })
        .finally(() => {
          this.inFlight = undefined;
        });
    }, this.o.intervalMs ?? HEARTBEAT_INTERVAL_MS);
  }

  async stop(): Promise<void> {
    this.stopInterval();
    await this.inFlight;
  }

  private stopInterval(): void {
    if (this.handle !== undefined) this.timers.clearInterval(this.handle);
    this.handle = undefined;
  }

  /**
   * One Get: throws the PreflightError of `liveProviderIn` when a live provider wrote the heartbeat (not with --force).
   */
  async check(): Promise<Resource | undefined> {
    const p = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: this.o.providerId };
    const current = await getIfExists(this.o.state, p, { signal: this.o.signal });
    // Before our first beat preflight has just decided (and --force may have overridden it).
    const live =
      this.o.force || this.lastBeatMs === undefined
        ? undefined
        : liveProviderIn(current, this.o.providerId, this.o.now(), this.lastBeatMs);
    if (live) throw live;
    return current;
  }

  async beat(): Promise<void> {
    const { state, providerId } = this.o;
    const p = { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: providerId };
    const nowMs = this.o.now();
    const spec = { last_heartbeat_timestamp: new Date(nowMs).toISOString(), error: heartbeatError(providerId) };
    const current = await this.check();
    if (!current) {
      await state.create(
        { metadata: newMetadata(p), spec: { protoSpec: encodeSpec(InfraProviderHealthStatusSpec, spec) } },
        { owner: `${providerId}.${HEALTH_STATUS_CONTROLLER}`, signal: this.o.signal },
      );
    } else {
      const next: Resource = {
        metadata: { ...current.metadata },
        spec: { protoSpec: updateSpec(InfraProviderHealthStatusSpec, current.spec.protoSpec, spec) },
      };
      await state.update(next, { owner: current.metadata.owner, signal: this.o.signal, before: current });
    }
    this.lastBeatMs = nowMs;
    this.beats++;
  }
}
