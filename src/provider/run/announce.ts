// Announce stub mode (docs/omni-lifecycle.md 7.1): upsert the ProviderStatus keeping its labels
// (above all the static label, docs/omni-lifecycle.md 1) and schema, and send ProviderHealthStatus
// heartbeats every 30 s whose error says the provider is being decommissioned. Everything written
// here starts with `stub-provider`, so a re-run recognises a stub's heartbeat, and the heartbeat
// names its run (ANNOTATION_RUN): one run per provider at a time (design rule 7). The first beat is
// the run's first write and its lock: a version-guarded Create or Update, so of two runs exactly one
// writes it; the other finds a live heartbeat of another run and stops (STUB_CONCURRENT_RUN). Each
// later beat is the same guarded Update: finding another run's heartbeat means that run took over
// (`--force`): this run stops starting anything (STUB_RUN_TAKEN_OVER). A run that ends without
// deregistering marks its heartbeat ended (ANNOTATION_RUN_ENDED), so the next run need not wait.

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
import { ExitCode, PreflightError, StubError } from '../../exit-codes.js';
import { HEALTH_STATUS_CONTROLLER } from '../profile.js';
import { STUB_MARKER } from '../plan/facts.js';
import { ANNOTATION_RUN, ANNOTATION_RUN_ENDED, LIVE_HEARTBEAT_MS, concurrentRun, heartbeatOf } from './preflight.js';

export const HEARTBEAT_INTERVAL_MS = 30_000;

export function stubVersionText(version: string): string {
  return `${STUB_MARKER} ${version}, decommissioning`;
}

export function heartbeatError(providerId: string, runId?: string): string {
  return (
    `${STUB_MARKER}: provider ${providerId} is being decommissioned; it releases machines being deleted and ` +
    `refuses new machines${runId ? ` (run ${runId})` : ''}`
  );
}

/** Another run wrote the heartbeat during this run (`--force`): this run stops starting anything. */
export class RunTakenOverError extends StubError {
  constructor(
    readonly otherRun: string,
    providerId: string,
  ) {
    super(
      'STUB_RUN_TAKEN_OVER',
      ExitCode.Incomplete,
      `another stub-provider run (${otherRun}) of provider ${providerId} took over during this run: this run ` +
        `started nothing more, finished what was under way, and left the rest to it (see the report)`,
    );
  }
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
  /** This run's ID: the heartbeat names it. */
  runId: string;
  /** Wall-clock milliseconds as Omni sees them (local clock plus the adopted server offset). */
  now: () => number;
  timers?: Timers;
  intervalMs?: number;
  /** --force: keep going although another writer's heartbeat shows up. */
  force?: boolean;
  /** Called when a beat on the interval finds a live provider's heartbeat (the beat wrote nothing). */
  onLiveProvider?: (err: PreflightError) => void;
  /** Called when a beat on the interval finds that another run took the heartbeat over (the beat wrote nothing). */
  onTakenOver?: (err: RunTakenOverError) => void;
  /** Live window of another run's heartbeat (default LIVE_HEARTBEAT_MS). */
  liveMs?: number;
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
  /** Another run wrote it: nothing more is written to it by this run. */
  private takenOver: RunTakenOverError | undefined;
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
          if (err instanceof PreflightError || err instanceof RunTakenOverError) {
            this.stopInterval();
            if (err instanceof RunTakenOverError) this.o.onTakenOver?.(err);
            else this.o.onLiveProvider?.(err);
            return;
          }
          this.o.logger.warn({ err: (err as Error).message }, 'heartbeat failed; retrying at the next interval');
        })
        .finally(() => {
          this.inFlight = undefined;
        });
    }, this.o.intervalMs ?? HEARTBEAT_INTERVAL_MS);
  }

  /**
   * Stops the beats. `ended`: the run ends without deregistering: the heartbeat (still this run's)
   * says so, within `endMs` and whatever the run's signal (an interrupted run marks it too).
   */
  async stop(o: { ended?: boolean; endMs?: number } = {}): Promise<void> {
    this.stopInterval();
    await this.inFlight;
    if (!o.ended || this.lastBeatMs === undefined || this.takenOver) return;
    try {
      await this.markEnded(AbortSignal.timeout(o.endMs ?? 5_000));
    } catch (err) {
      this.o.logger.warn(
        { err: (err as Error).message },
        'could not mark the heartbeat ended: the next run waits for it to go stale (at most 60 s)',
      );
    }
  }

  private stopInterval(): void {
    if (this.handle !== undefined) this.timers.clearInterval(this.handle);
    this.handle = undefined;
  }

  /**
   * One Get: throws the PreflightError of `liveProviderIn` when a live provider wrote the heartbeat
   * (not with --force), and RunTakenOverError when, after this run's first beat, another run did.
   */
  async check(): Promise<Resource | undefined> {
    if (this.takenOver) throw this.takenOver;
    const current = await getIfExists(this.o.state, this.pointer(), { signal: this.o.signal });
    // Before our first beat preflight has just decided (and --force may have overridden it).
    const live =
      this.o.force || this.lastBeatMs === undefined
        ? undefined
        : liveProviderIn(current, this.o.providerId, this.o.now(), this.lastBeatMs);
    if (live) throw live;
    if (current && this.lastBeatMs !== undefined) this.checkStillOurs(current);
    return current;
  }

  async beat(): Promise<void> {
    const nowMs = this.o.now();
    let current = await this.check();
    for (let attempt = 1; ; attempt++) {
      if (this.lastBeatMs === undefined && current) this.checkNoOtherRun(current);
      try {
        await this.write(current, nowMs);
        break;
      } catch (err) {
        // Another writer came between the read and the write (a guarded Create or Update): whose is it now?
        const raced = hasCode(err, 'OMNI_ALREADY_EXISTS') || hasCode(err, 'OMNI_FAILED_PRECONDITION');
        if (!raced || attempt >= 3) throw err;
        current = await getIfExists(this.o.state, this.pointer(), { signal: this.o.signal });
        if (current && heartbeatOf(current, nowMs)?.runId === this.o.runId) break; // our write, its answer lost
        if (current && this.lastBeatMs !== undefined) this.checkStillOurs(current);
      }
    }
    this.lastBeatMs = nowMs;
    this.beats++;
  }

  private pointer() {
    return { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: this.o.providerId };
  }

  /** The first beat: another run's live heartbeat means that run is under way (unless --force). */
  private checkNoOtherRun(current: Resource): void {
    const hb = heartbeatOf(current, this.o.now());
    if (!hb?.ours || hb.ended || hb.runId === this.o.runId || this.o.force) return;
    if (hb.ageMs < (this.o.liveMs ?? LIVE_HEARTBEAT_MS)) throw concurrentRun(this.o.providerId, hb);
  }

  /** A later beat: the heartbeat still names this run, or another run took over. */
  private checkStillOurs(current: Resource): void {
    const hb = heartbeatOf(current, this.o.now());
    if (!hb?.ours || hb.runId === this.o.runId) return;
    this.takenOver = new RunTakenOverError(hb.runId ?? 'unknown', this.o.providerId);
    throw this.takenOver;
  }

  private async write(current: Resource | undefined, nowMs: number): Promise<void> {
    const { state, providerId, runId } = this.o;
    const spec = {
      last_heartbeat_timestamp: new Date(nowMs).toISOString(),
      error: heartbeatError(providerId, runId),
    };
    if (!current) {
      await state.create(
        {
          metadata: newMetadata(this.pointer(), { annotations: { [ANNOTATION_RUN]: runId } }),
          spec: { protoSpec: encodeSpec(InfraProviderHealthStatusSpec, spec) },
        },
        { owner: `${providerId}.${HEALTH_STATUS_CONTROLLER}`, signal: this.o.signal },
      );
      return;
    }
    const annotations: Record<string, string> = { ...current.metadata.annotations, [ANNOTATION_RUN]: runId };
    delete annotations[ANNOTATION_RUN_ENDED];
    const next: Resource = {
      metadata: { ...current.metadata, annotations },
      spec: { protoSpec: updateSpec(InfraProviderHealthStatusSpec, current.spec.protoSpec, spec) },
    };
    await state.update(next, { owner: current.metadata.owner, signal: this.o.signal, before: current });
  }

  /** The heartbeat says this run ended (its timestamp stays that of the last beat): one guarded Update. */
  private async markEnded(signal: AbortSignal): Promise<void> {
    const current = await getIfExists(this.o.state, this.pointer(), { signal });
    if (!current || heartbeatOf(current, this.o.now())?.runId !== this.o.runId) return;
    const at = new Date(this.o.now()).toISOString();
    const next: Resource = {
      metadata: { ...current.metadata, annotations: { ...current.metadata.annotations, [ANNOTATION_RUN_ENDED]: at } },
      spec: {
        protoSpec: updateSpec(InfraProviderHealthStatusSpec, current.spec.protoSpec, {
          error: `${heartbeatError(this.o.providerId, this.o.runId)}; that run ended at ${at}`,
        }),
      },
    };
    await this.o.state.update(next, { owner: current.metadata.owner, signal, before: current });
  }
}
