// src/provider/run: a run's effects: its passes (this file), an item's operations performed
// (executor.ts), refusals (refusals.ts), deregistration (deregister.ts), --settle (settle.ts), outcomes
// and progress (outcomes.ts), the limiter of items and wipes (limiter.ts), stub mode announced (announce.ts) and the
// checks before any write (preflight.ts).
//
// A run: plans (snapshot.ts, plan.ts) and applies them (executor.ts), per machine in the order of
// docs/design.md rule 5, all machines at once with at most `--concurrency` calls in flight (the client's
// limit, omni-client/call-limit.ts); waits for
// Omni through the run's caches; refuses new registrations (refusals.ts) and announces stub mode
// (announce.ts) in whole-provider mode only; deregisters once nothing of the ID is left
// (deregister.ts); after the last write, watches what others still held for --settle (settle.ts).
// Every read of Omni's collections is a query on the run's caches (cache.ts: one List and one
// Watch per kind). Without --wait a run plans again only after Omni destroyed what it released;
// with --wait, on every change its caches see, until everything is released or --timeout passed.

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Pointer } from '../../omni-api/resource.js';
import { describePointer, NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, T } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import type { WipeOptions, WipeStrategy } from '../../wipe/index.js';
import { announceProviderStatus, Heartbeat, liveProviderIn } from './announce.js';
import type { RunTakenOverError } from './announce.js';
import type { Timers } from './announce.js';
import { ProviderCache } from '../read/cache.js';
import { deregister } from './deregister.js';
import type { HoldFacts } from '../plan/explain.js';
import { Executor, holdsNow, NotStartedError } from './executor.js';
import type { ItemEnd } from './executor.js';
import { Limiter } from './limiter.js';
import {
  Deadline,
  DEREGISTER_GRACE_MS,
  finishedWaiting,
  onlyDeregistrationLeft,
  onlyOmniLeft,
  remainingAt,
  type Remaining,
} from './deadline.js';
import { isTooLarge, runItem } from './item-run.js';
import { Outcomes, keyOf } from './outcomes.js';
import type { ItemEnded, ItemOutcome, ReconcileProgress, RefusalOutcome } from './outcomes.js';
import type { Plan, PlanItem, PlanOptions } from '../plan/plan.js';
import { buildPlan } from '../plan/planner.js';
import { followedKinds, hasWork, withoutResources } from '../plan/plan.js';
import type { ProfileOption } from '../profile.js';
import { refuse } from './refusals.js';
import { confirmByGet } from './confirm.js';
import { settle } from './settle.js';
import type { SettleSummary } from './settle.js';
import { takeSnapshot } from '../read/snapshot.js';
import type { OnStage, Stage, StageDetail } from './stage.js';
import type { Snapshot } from '../plan/plan.js';

export interface ReconcileOptions {
  providerId: string;
  /** `--machine` values; empty = whole-provider mode. */
  machines: string[];
  profile: ProfileOption;
  stateTypes: string[];
  deregister: boolean;
  /** Keep watching and acting until everything is released (or deregistered) or `timeoutMs` passed. */
  wait: boolean;
  timeoutMs: number;
  /** Without --wait: how long one pass waits for Omni to clear its own finalizers after a teardown. */
  omniWaitMs?: number;
  /**
   * After the last write: how long to watch what was released while finalizers of others still held
   * it, for Omni's own controllers to let go (default DEFAULT_SETTLE_MS); 0: not watched.
   */
  settleMs?: number;
  /** `--concurrency`: the client's limit on calls in flight; the plan items under way follow from it (limiter.ts). */
  concurrency: number;
  signal?: AbortSignal;
  /** --force: a live provider's heartbeat showing up during the run does not stop it (design rule 7). */
  force?: boolean;
  /** Called once with the first plan when it would change something (or may, with --wait); false = change nothing. */
  confirm?: (plan: Plan) => Promise<boolean>;
}

export interface ReconcileDeps {
  state: State;
  logger: Logger;
  /** The stub's version, written into ProviderStatus. */
  version: string;
  /** Wall clock as Omni sees it (heartbeat timestamps). */
  now?: () => number;
  /** Monotonic clock for deadlines. */
  monotonic?: () => number;
  timers?: Timers;
  heartbeatMs?: number;
  wipe?: { strategy: WipeStrategy; options: WipeOptions };
  /**
   * Called whenever a machine-level item (InfraMachine, MachineRequest, BMCConfig) is planned or
   * ends, a refusal is written, or what waits changes; `ended` names an item (a refusal, the
   * deregistration) that ended, or ended otherwise than before (a blocked item released later).
   */
  progress?: (p: ReconcileProgress, ended?: ItemEnded) => void;
  /**
   * The level of the per-item log lines (released, cleaned up, blocked, failed, refused); absent:
   * each its own (info, warn, error). `debug` where a person's display shows each item already (the
   * progress line on a terminal, commands/progress.ts).
   */
  itemLogLevel?: 'debug';
  /** Called with the plan of every pass before it is applied (what `plan` would print at that moment). */
  planned?: (plan: Plan) => void;
  /** Told each stage the run enters (stage.ts), and how far it got within it. */
  stage?: OnStage;
  /** Told each secret the run reads from Omni (a BMC password for a wipe), so that no output shows it. */
  onSecret?: (secret: string) => void;
  /** This run's ID (the audit log's `run`): its heartbeat and its wipe claims name it. Default: a new one. */
  runId?: string;
}

export interface ReconcileResult {
  runId: string;
  /** Another run took the heartbeat over during this one (design rule 7): this run stopped starting anything. */
  takenOver?: RunTakenOverError;
  /** The plans as read. */
  firstPlan: Plan;
  lastPlan: Plan;
  outcomes: ItemOutcome[];
  refusals: RefusalOutcome[];
  announced: boolean;
  heartbeats: number;
  deregistered: boolean;
  declined: boolean;
  timedOut: boolean;
  /** With --timeout: what the plan made when it passed still holds that no outcome reports (deadline.ts). */
  remaining: Remaining[];
  interrupted: boolean;
  passes: number;
  settle: SettleSummary;
}

const DEFAULT_OMNI_WAIT_MS = 60_000;
/** Omni's controllers let go within the same second when nothing holds them (docs/omni-behaviour.md): a few seconds. */
export const DEFAULT_SETTLE_MS = 5_000;
/** How long the heartbeat's 'ended' mark may take after SIGINT or SIGTERM. */
const MARK_ENDED_AFTER_SIGNAL_MS = 1_000;
const RECHECK_MS = 30_000;
/** A wipe claim holds for the wipe's timeout and this much more (wipe-claim.ts). */
const WIPE_CLAIM_MARGIN_MS = 60_000;

export async function reconcile(deps: ReconcileDeps, o: ReconcileOptions): Promise<ReconcileResult> {
  return new Reconciler(deps, o).run();
}

/**
 * What one pass applied: the parents it released (for Omni to destroy), and a deregistration it left to the next pass.
 */
interface Applied {
  parents: Pointer[];
  deferred: boolean;
}

class Reconciler {
  private readonly state: State;
  private readonly log: Logger;
  private readonly id: string;
  private readonly whole: boolean;
  private readonly wipeLimiter: Limiter;
  /** Plan items under way at once. */
  private readonly items: Limiter;
  /** The run's caches of Omni's collections, and what its own calls answered. */
  private readonly reads: ProviderCache;
  private readonly monotonic: () => number;
  private readonly planOptions: PlanOptions;
  /** --timeout's end (deadline.ts); the time a person takes to answer the confirmation is added (run). */
  private readonly deadline: Deadline;
  private readonly outcomes: Outcomes;
  private readonly blockedKeys = new Set<string>();
  /** What the run released for Omni to destroy: read again by ID before a report says it is still there. */
  private readonly releasedParents = new Map<string, Pointer>();
  /** The refusals this run wrote: never written again (refusals.ts). */
  private readonly refusedKeys = new Set<string>();
  /** Each item's rank, by key: 1, 2, 3 ... in the order the items first started in the run (limiter.ts). */
  private readonly ranks = new Map<string, number>();
  /** Items released while finalizers of others stayed on them: what to watch after the last write. */
  private readonly heldAtRelease = new Map<string, { target: Pointer; facts: HoldFacts }>();
  private readonly settled: SettleSummary;
  /** The snapshot the current plan was made from (the planner's input again when an item is planned anew). */
  private pass: Snapshot | undefined;
  private heartbeat: Heartbeat | undefined;
  private announced = false;
  private deregistered = false;
  /** Set when a heartbeat on the interval found that the real provider is back: the run stops. */
  private liveProvider: Error | undefined;
  /** The first write Omni refused as larger than its burst: the run stops at once and throws it (exit 6). */
  private fatal: Error | undefined;
  /** The last plan made (an interruption reports its items never started as such). */
  private latest: Plan | undefined;
  private readonly halt = new AbortController();
  /** What every call and wait of the run is cancelled by: the operator's signal, or the run's own halt. */
  private readonly signal: AbortSignal;
  /** Set when a heartbeat found that another run took over: nothing more is started (design rule 7). */
  private takenOver: RunTakenOverError | undefined;
  private readonly runId: string;

  constructor(
    private readonly deps: ReconcileDeps,
    private readonly o: ReconcileOptions,
  ) {
    this.state = deps.state;
    this.log = deps.logger;
    this.id = o.providerId;
    this.runId = deps.runId ?? randomUUID();
    this.whole = o.machines.length === 0;
    this.signal = o.signal ? AbortSignal.any([o.signal, this.halt.signal]) : this.halt.signal;
    this.wipeLimiter = new Limiter(deps.wipe?.options.concurrency ?? 1);
    this.items = Limiter.forItems(o.concurrency);
    this.reads = new ProviderCache(this.state, {
      providerId: this.id,
      live: true,
      logger: this.log,
      signal: this.signal,
    });
    this.monotonic = deps.monotonic ?? (() => performance.now());
    this.deadline = new Deadline(this.monotonic, o.timeoutMs);
    this.settled = { ms: o.settleMs ?? DEFAULT_SETTLE_MS, items: 0, gone: 0, held: 0 };
    this.planOptions = {
      providerId: this.id,
      machines: o.machines,
      deregister: o.deregister,
      wipe: deps.wipe !== undefined && deps.wipe.strategy.name !== 'none',
    };
    this.outcomes = new Outcomes({
      log: this.log,
      ...(deps.progress ? { progress: deps.progress } : {}),
      ...(deps.itemLogLevel ? { itemLogLevel: deps.itemLogLevel } : {}),
      ...(o.wait ? { timeLeftMs: () => Math.max(0, this.deadline.leftMs()) } : {}),
    });
  }

  private async planNow(): Promise<Plan> {
    const snap = await takeSnapshot(this.state, {
      providerId: this.id,
      profile: this.o.profile,
      stateTypes: this.o.stateTypes,
      signal: this.signal,
      checkParents: this.whole,
      cache: this.reads,
      ...(this.deps.stage ? { stage: this.deps.stage } : {}),
    });
    this.stage('planning');
    const plan = buildPlan(snap, this.planOptions);
    // Without --wait, the events of the kinds the items do not act on are left unread (cache.ts).
    this.reads.follow(this.o.wait ? 'all' : followedKinds(plan));
    this.pass = withoutResources(snap);
    this.deps.planned?.(plan);
    this.latest = plan;
    return plan;
  }

  private stage(stage: Stage, detail?: StageDetail): void {
    this.deps.stage?.(stage, detail);
  }

  async run(): Promise<ReconcileResult> {
    try {
      return await this.passes();
    } finally {
      // The caches' watches end with the run, whatever ended it (a declined plan too).
      this.reads.close();
    }
  }

  private async passes(): Promise<ReconcileResult> {
    let plan = await this.planNow();
    const firstPlan = plan;
    const result = (extra: Partial<ReconcileResult>, passes: number): ReconcileResult => ({
      runId: this.runId,
      ...(this.takenOver ? { takenOver: this.takenOver } : {}),
      firstPlan,
      lastPlan: plan,
      outcomes: [...this.outcomes.items.values()],
      refusals: [...this.outcomes.refusals.values()],
      announced: this.announced,
      heartbeats: this.heartbeat?.beats ?? 0,
      deregistered: this.deregistered,
      declined: false,
      timedOut: false,
      remaining: [],
      interrupted: false,
      passes,
      settle: this.settled,
      ...extra,
    });
    if (this.o.confirm && this.wouldAct(plan)) {
      const asked = this.monotonic();
      this.stage('confirming');
      const yes = await this.o.confirm(plan);
      // --timeout is for the run: a person who read the plan for ten minutes did not use it up.
      this.deadline.extend(this.monotonic() - asked);
      if (!yes) return result({ declined: true }, 0);
    }
    let pass = 0;
    let timedOut = false;
    let remaining: Remaining[] = [];
    try {
      ({ plan, pass, timedOut } = await this.loop(plan));
      if (timedOut) {
        ({ plan, timedOut } = await this.afterDeadline(pass));
        const scope = { whole: this.whole, deregister: this.o.deregister, deregistered: this.deregistered };
        if (timedOut) remaining = remainingAt(plan, this.outcomes.items, this.outcomes.refusals, scope);
      } else ({ plan, pass } = await this.confirmFacts(plan, pass));
      if (this.o.wait) this.settled.ms = this.deadline.settleMs(this.settled.ms);
      this.stage('settling', { items: this.heldAtRelease.size + plan.lettingGo.length, ms: this.settled.ms });
      await settle(
        {
          reads: this.reads,
          outcomes: this.outcomes,
          log: this.log,
          signal: this.signal,
          holdsNow: (p, f) => holdsNow(this.reads, this.id, p, f),
        },
        this.settled,
        this.heldAtRelease,
        plan,
      );
    } catch (err) {
      if (this.fatal) throw this.fatal;
      if (!this.o.signal?.aborted) throw err;
      // An item under way is 'interrupted' already, judged from the signal where it failed (item-run.ts).
      // What the plan held and the interruption came before: not started, not failed.
      for (const item of (this.latest ?? plan).items) if (!this.outcomes.items.has(keyOf(item))) this.notStarted(item);
      return result({ interrupted: true }, pass);
    } finally {
      // Not deregistered (that destroys the heartbeat): marked ended, so the next run need not wait for
      // it; not after --timeout (no write then: the next run waits for it to go stale); after a signal
      // within a second at most, as a stop asks for a prompt exit (docs/operator-guide.md, 'The result on
      // every exit'): if Omni is slower, the next run waits for the heartbeat to go stale.
      await this.heartbeat?.stop({
        ended: !(this.o.wait && this.deadline.passed()),
        ...(this.o.signal?.aborted ? { endMs: MARK_ENDED_AFTER_SIGNAL_MS } : {}),
      });
    }
    if (this.takenOver) return result({}, pass);
    this.stage('done');
    return result({ timedOut, remaining }, pass);
  }

  /** The passes: until nothing is left to do, or (--wait) everything is released or --timeout passed. */
  private async loop(first: Plan): Promise<{ plan: Plan; pass: number; timedOut: boolean }> {
    let plan = first;
    for (let pass = 1; ; pass++) {
      this.log.debug(
        { pass, items: plan.items.length, refusals: plan.refusals.length, deregistration: plan.deregistration.status },
        'pass',
      );
      if (this.liveProvider) throw this.liveProvider;
      const announcing = this.whole && !this.announced && (plan.announce || this.waitsFor(plan));
      if (announcing) await this.announce(plan);
      // What the announcement wrote is not in this plan: its deregistration is planned again first.
      const { parents, deferred } = await this.apply(plan, pass, announcing, this.writesUntil());
      for (const p of parents) this.releasedParents.set(describePointer(p), p);
      const end = { plan, pass };
      if (this.deregistered || this.takenOver) return { ...end, timedOut: false };
      if (this.o.wait && this.deadline.passed())
        return { ...end, timedOut: !finishedWaiting(plan, this.whole, this.o.deregister) };
      if (deferred) {
        plan = await this.planNow();
        continue;
      }
      if (!this.o.wait) {
        if (!(this.whole && this.o.deregister && parents.length > 0 && pass < 3)) return { ...end, timedOut: false };
        // Omni destroys what we released; then the leftovers and the deregistration can follow.
        this.stage('waiting', { resources: parents.length, ms: this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS });
        await Promise.all(parents.map((p) => this.reads.wait(p, 'gone', this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS)));
        plan = await this.planNow();
        continue;
      }
      if (finishedWaiting(plan, this.whole, this.o.deregister)) return { ...end, timedOut: false };
      const ms = Math.min(this.deadline.leftMs(), RECHECK_MS);
      this.stage('waiting', { ms });
      await this.reads.changed(ms);
      if (this.o.signal?.aborted) throw this.o.signal.reason ?? new Error('aborted');
      if (this.deadline.passed()) return { ...end, timedOut: true };
      plan = await this.planNow();
    }
  }

  /**
   * --timeout passed (deadline.ts): no write starts any more. What is true now, planned from the caches (reads only);
   * if that leaves nothing but the deregistration, it runs within DEREGISTER_GRACE_MS. Timed out only when something
   * is still left.
   */
  private async afterDeadline(pass: number): Promise<{ plan: Plan; timedOut: boolean }> {
    await this.heartbeat?.stop();
    let plan = await this.planNow();
    // Omni destroys what the run released in its own time: the grace waits for that before judging (bounded by it).
    const graceLeft = () => this.deadline.leftMs() + DEREGISTER_GRACE_MS;
    while (onlyOmniLeft(plan, this.whole, this.o.deregister) && graceLeft() > 0) {
      this.stage('waiting', { ms: Math.min(graceLeft(), RECHECK_MS) });
      await this.reads.changed(Math.min(graceLeft(), RECHECK_MS));
      if (this.o.signal?.aborted) throw this.o.signal.reason ?? new Error('aborted');
      plan = await this.planNow();
    }
    if (onlyDeregistrationLeft(plan, this.whole, this.o.deregister)) {
      this.log.info({ graceMs: DEREGISTER_GRACE_MS }, '--timeout passed with everything released: deregistering');
      await this.apply(plan, pass + 1, false, this.deadline.notAfter(DEREGISTER_GRACE_MS));
    }
    return { plan, timedOut: !this.deregistered && !finishedWaiting(plan, this.whole, this.o.deregister) };
  }

  /**
   * After the last pass (design rule 10): what the report would give as a reason (still there, still
   * held) came from the caches, and a kind's watch may have stopped following Omni. What the run
   * released or left held is read again by its ID (confirm.ts); if any of it changed, the run plans
   * once more on what is true now (it may deregister).
   */
  private async confirmFacts(plan: Plan, pass: number): Promise<{ plan: Plan; pass: number }> {
    if (this.deregistered || this.takenOver) return { plan, pass };
    const targets = [...this.releasedParents.values(), ...[...this.heldAtRelease.values()].map((h) => h.target)];
    const d = { state: this.state, reads: this.reads, log: this.log, signal: this.signal };
    if (!(await confirmByGet(d, targets))) return { plan, pass };
    plan = await this.planNow();
    const dereg = plan.deregistration;
    if (this.whole && dereg.status === 'ready' && dereg.item) await this.apply(plan, ++pass, false, this.writesUntil());
    return { plan, pass };
  }

  /** The time for writes (CallOptions.notAfter): --timeout's end with --wait; none without. */
  private writesUntil(): number | undefined {
    return this.o.wait ? this.deadline.notAfter() : undefined;
  }

  /**
   * Work now, or with --wait something still to wait for. A re-run after a finished run has neither
   * and writes nothing: announcing then would re-create the ProviderStatus and a heartbeat it
   * deregistered, and the run would stop at once and leave them behind.
   */
  private wouldAct(plan: Plan): boolean {
    return hasWork(plan) || this.waitsFor(plan);
  }

  private waitsFor(plan: Plan): boolean {
    return this.o.wait && !finishedWaiting(plan, this.whole, this.o.deregister);
  }

  private async announce(plan: Plan): Promise<void> {
    this.stage('announcing');
    const ctx = {
      state: this.state,
      providerId: this.id,
      version: this.deps.version,
      logger: this.log,
      signal: this.signal,
    };
    // The heartbeat first: it is the run's lock (design rule 7). Of two runs, the one that did not
    // write it stops here (STUB_CONCURRENT_RUN), before its first side effect.
    const heartbeat = new Heartbeat({
      ...ctx,
      runId: this.runId,
      now: this.deps.now ?? Date.now,
      force: this.o.force === true,
      onLiveProvider: (err) => {
        this.liveProvider = err;
      },
      onTakenOver: (err) => {
        this.takenOver = err;
        this.log.warn({ providerId: this.id, otherRun: err.otherRun }, err.message);
      },
      ...(this.deps.timers ? { timers: this.deps.timers } : {}),
      ...(this.deps.heartbeatMs ? { intervalMs: this.deps.heartbeatMs } : {}),
    });
    await heartbeat.start();
    this.heartbeat = heartbeat;
    const current = await getIfExists(
      this.state,
      { namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: this.id },
      { signal: this.signal },
    );
    // The static label from the facts (InfraMachines exist, or --profile bare-metal), not from the profile flag alone.
    const wrote = await announceProviderStatus(ctx, current, plan.profile.staticLabel);
    // No write after --timeout (deadline.ts): the beats stop then; a deregistration in its grace destroys it.
    const left = this.deadline.leftMs();
    if (this.o.wait && Number.isFinite(left)) setTimeout(() => void this.heartbeat?.stop(), Math.max(0, left)).unref();
    this.announced = true;
    this.log.info(
      { providerId: this.id, wroteProviderStatus: wrote },
      'announced stub mode: ProviderStatus says decommissioning; heartbeats every 30 s',
    );
  }

  /**
   * Runs every item and refusal of the plan, then its deregistration (unless this pass announced); no write after
   * `notAfter`, no item started after --timeout.
   */
  private async apply(plan: Plan, pass: number, announced: boolean, notAfter: number | undefined): Promise<Applied> {
    const parents: Pointer[] = [];
    const items = plan.items.filter((it) => this.o.wait || pass === 1 || !this.blockedKeys.has(keyOf(it)));
    this.stage('releasing', { pass, items: items.length });
    this.outcomes.track(items, plan.running.length);
    const executor = this.executor(notAfter);
    await Promise.all([
      this.items.each(
        items,
        async (item) => {
          // Not started: the plan made after --timeout reports it as left (deadline.ts).
          if (this.fatal || (this.o.wait && this.deadline.passed())) return;
          const end = await this.runItem(executor.ranked(this.rankOf(item)), item);
          if (end?.status === 'released') this.items.grow();
          if (end?.releasedParent) parents.push(end.releasedParent);
        },
        (item) => this.rankOf(item),
      ),
      ...(this.whole
        ? plan.refusals.map((r) =>
            refuse(
              {
                state: this.state,
                providerId: this.id,
                outcomes: this.outcomes,
                log: this.log,
                signal: this.signal,
                reads: this.reads,
                refused: this.refusedKeys,
                ...(notAfter !== undefined ? { notAfter } : {}),
              },
              r,
            ).catch((err: unknown) => {
              if (!isTooLarge(err)) throw err;
              this.stopRun(err);
            }),
          )
        : []),
    ]);
    if (this.fatal) throw this.fatal;
    if (this.o.signal?.aborted) throw this.o.signal.reason ?? new Error('aborted');
    const d = plan.deregistration;
    if (!this.whole || d.status !== 'ready' || !d.item || this.takenOver) return { parents, deferred: false };
    if (announced) return { parents, deferred: true };
    this.stage('deregistering');
    this.deregistered = await deregister(
      {
        runItem: (item) =>
          this.runItem(executor.ranked(this.rankOf(item)), item).then((end) => end?.status === 'released'),
        record: (outcome) => this.outcomes.record(keyOf(d.item!), outcome),
        checkNoLiveProvider: () => this.checkNoLiveProvider(),
        stopHeartbeat: async () => {
          await this.heartbeat?.stop();
          this.heartbeat = undefined;
        },
      },
      d.item,
    );
    return { parents, deferred: false };
  }

  private executor(notAfter: number | undefined): Executor {
    return new Executor(
      {
        state: this.state,
        log: this.log,
        providerId: this.id,
        wipeLimiter: this.wipeLimiter,
        reads: this.reads,
        ...(this.deps.wipe ? { wipe: this.deps.wipe } : {}),
        signal: this.signal,
        ...(notAfter !== undefined ? { notAfter } : {}),
        waitMs: () => (this.o.wait ? Math.max(0, this.deadline.leftMs()) : (this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS)),
        outside: (fn, forOmni, rank) => this.items.outside(() => (forOmni ? this.outcomes.waiting(fn) : fn()), rank),
        ...(this.deps.onSecret ? { onSecret: this.deps.onSecret } : {}),
        beforeWipe: () => {
          if (this.takenOver || this.signal.aborted) throw new NotStartedError();
        },
        claim: {
          runId: this.runId,
          now: this.deps.now ?? Date.now,
          holdMs: (this.deps.wipe?.options.timeoutMs ?? 0) + WIPE_CLAIM_MARGIN_MS,
        },
      },
      this.pass!,
      this.planOptions,
    );
  }

  /** Runs one item and records how it ended (item-run.ts); undefined when it did not end released or blocked. */
  private runItem(executor: Executor, item: PlanItem): Promise<ItemEnd | undefined> {
    return runItem(
      {
        outcomes: this.outcomes,
        blockedKeys: this.blockedKeys,
        heldAtRelease: this.heldAtRelease,
        signal: this.signal,
        takenOver: () => this.takenOver !== undefined,
        stopRun: (err) => this.stopRun(err),
        notStarted: (it) => this.notStarted(it),
      },
      executor,
      item,
    );
  }

  /**
   * An item's rank: when it first started in the run, kept through re-plans and passes. Its calls take their turn by
   * it (the call limiter, the write window), so items under way finish before new ones start: under a write budget
   * machines are released at a steady rate from the start, and an interrupted run has released some.
   */
  private rankOf(item: PlanItem): number {
    const key = keyOf(item);
    let rank = this.ranks.get(key);
    if (rank === undefined) this.ranks.set(key, (rank = this.ranks.size + 1));
    return rank;
  }

  /** Stops the run at once (in-flight calls cancelled, nothing new started): `reconcile` throws `err`. */
  private stopRun(err: Error): void {
    this.fatal ??= err;
    this.halt.abort(err);
  }

  /** An item the run never started: the interruption (or another run's takeover) came first. */
  private notStarted(item: PlanItem): void {
    this.outcomes.record(keyOf(item), {
      kind: item.kind,
      id: item.id,
      status: 'not-started',
      reason: this.takenOver
        ? `not started: another run (${this.takenOver.otherRun}) took over`
        : 'not started: the run was interrupted first',
      nextStep: this.takenOver ? 'the run that took over releases it' : 'run again',
      counts: true,
    });
  }

  /**
   * Design rule 7 again right before deregistering (one Get): the real provider may have come back
   * during a long run; deregistering it would destroy its TLSConfig (with its CA key) and status.
   */
  private async checkNoLiveProvider(): Promise<void> {
    if (this.liveProvider) throw this.liveProvider;
    if (this.heartbeat) {
      await this.heartbeat.check();
      return;
    }
    if (this.o.force) return;
    const current = await getIfExists(
      this.state,
      { namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: this.id },
      { signal: this.signal },
    );
    const live = liveProviderIn(current, this.id, (this.deps.now ?? Date.now)());
    if (live) throw live;
  }
}
