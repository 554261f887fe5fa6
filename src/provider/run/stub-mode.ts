// Stub mode in a run (whole-provider mode only; announce.ts writes it): the heartbeat started first,
// as the run's lock (design rule 7), then the ProviderStatus; what the beats found (the real provider
// back, another run taking over); the live-provider check right before deregistering; the beats
// stopped before the heartbeat is destroyed, at --timeout, or at the run's end. Apart from the
// passes (reconcile.ts): the deregistration (deregister.ts) and the items (item-run.ts) ask it too.

import type { Logger } from 'pino';
import { NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import type { Plan } from '../plan/plan.js';
import { announceProviderStatus, Heartbeat, liveProviderIn } from './announce.js';
import type { RunTakenOverError, Timers } from './announce.js';
import type { OnStage } from './stage.js';

/** What the stub mode takes of the run's dependencies (ReconcileDeps, contract.ts). */
export interface StubModeRun {
  state: State;
  logger: Logger;
  /** The stub's version, written into ProviderStatus. */
  version: string;
  /** Wall clock as Omni sees it (heartbeat timestamps); default Date.now. */
  now?: () => number;
  timers?: Timers;
  heartbeatMs?: number;
  stage?: OnStage;
}

export interface StubModeDeps {
  run: StubModeRun;
  providerId: string;
  /** This run's ID: its heartbeat names it. */
  runId: string;
  signal: AbortSignal;
  /** --force: a live provider's heartbeat showing up during the run does not stop it (design rule 7). */
  force: boolean;
  /** How long the beats may go on (--timeout's end with --wait); Infinity: until the run ends. */
  beatsLeftMs: () => number;
}

export class StubMode {
  announced = false;
  /** Set when a heartbeat on the interval found that the real provider is back: the run stops. */
  liveProvider: Error | undefined;
  /** Set when a heartbeat found that another run took over: nothing more is started (design rule 7). */
  takenOver: RunTakenOverError | undefined;
  private heartbeat: Heartbeat | undefined;

  private readonly now: () => number;

  constructor(private readonly d: StubModeDeps) {
    this.now = d.run.now ?? Date.now;
  }

  /** The heartbeats this run wrote. */
  get beats(): number {
    return this.heartbeat?.beats ?? 0;
  }

  /** The heartbeat, then the ProviderStatus (its static label from the plan's facts). */
  async announce(plan: Plan): Promise<void> {
    const d = this.d;
    d.run.stage?.('announcing');
    const { state, version, logger } = d.run;
    const ctx = { state, providerId: d.providerId, version, logger, signal: d.signal };
    // The heartbeat first: it is the run's lock (design rule 7). Of two runs, the one that did not
    // write it stops here (STUB_CONCURRENT_RUN), before its first side effect.
    const heartbeat = new Heartbeat({
      ...ctx,
      runId: d.runId,
      now: this.now,
      force: d.force,
      onLiveProvider: (err) => {
        this.liveProvider = err;
      },
      onTakenOver: (err) => {
        this.takenOver = err;
        logger.warn({ providerId: d.providerId, otherRun: err.otherRun }, err.message);
      },
      ...(d.run.timers ? { timers: d.run.timers } : {}),
      ...(d.run.heartbeatMs ? { intervalMs: d.run.heartbeatMs } : {}),
    });
    await heartbeat.start();
    this.heartbeat = heartbeat;
    const current = await getIfExists(
      state,
      { namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: d.providerId },
      { signal: d.signal },
    );
    // The static label from the facts (InfraMachines exist, or --profile bare-metal), not from the profile flag alone.
    const wrote = await announceProviderStatus(ctx, current, plan.profile.staticLabel);
    // No write after --timeout (deadline.ts): the beats stop then; a deregistration in its grace destroys it.
    const left = d.beatsLeftMs();
    if (Number.isFinite(left)) setTimeout(() => void this.heartbeat?.stop(), Math.max(0, left)).unref();
    this.announced = true;
    logger.info(
      { providerId: d.providerId, wroteProviderStatus: wrote },
      'announced stub mode: ProviderStatus says decommissioning; heartbeats every 30 s',
    );
  }

  /**
   * Design rule 7 again right before deregistering (one Get): the real provider may have come back
   * during a long run; deregistering it would destroy its TLSConfig (with its CA key) and status.
   */
  async checkNoLiveProvider(): Promise<void> {
    if (this.liveProvider) throw this.liveProvider;
    if (this.heartbeat) {
      await this.heartbeat.check();
      return;
    }
    if (this.d.force) return;
    const current = await getIfExists(
      this.d.run.state,
      { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: this.d.providerId },
      { signal: this.d.signal },
    );
    const live = liveProviderIn(current, this.d.providerId, this.now());
    if (live) throw live;
  }

  /** Before the heartbeat is destroyed (the deregistration): its beats stopped, or the next would write it again. */
  async stopHeartbeat(): Promise<void> {
    await this.heartbeat?.stop();
    this.heartbeat = undefined;
  }

  /**
   * The beats stopped: at --timeout (no write after it), or at the run's end (`ended`: the heartbeat
   * marked ended, within `endMs`). Nothing once the deregistration destroyed the heartbeat.
   */
  async stopBeats(o?: { ended?: boolean; endMs?: number }): Promise<void> {
    await this.heartbeat?.stop(o);
  }
}
