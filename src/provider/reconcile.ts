// Applies plans: per machine in the order of design.md rule 5, all machines at once with at most
// `concurrency` calls in flight; waits for Omni through shared watches; refuses new registrations
// and announces stub mode in whole-provider mode only; deregisters once nothing of the ID is left.
// Works from List results: no Get before an Update or a Destroy unless a conflict forces a re-read.
// A NotFound is done only for a resource read by exactly that ID (design rule 4); for one that was
// only listed, the item fails (`NotFoundUnconfirmedError`).

import type { Logger } from 'pino';
import { ExitCode, StubError } from '../exit-codes.js';
import type { Pointer, Resource } from '../omni-client/resource.js';
import { describePointer, NS_DEFAULT, NS_INFRA_PROVIDER, NS_INFRA_PROVIDER_EPHEMERAL, PHASE_RUNNING, T, newMetadata, pointerOf } from '../omni-client/resource.js';
import type { State } from '../omni-client/types.js';
import { getIfExists } from '../omni-client/read.js';
import {
  AlreadyExistsError, FailedPreconditionError, NotFoundError, PermissionDeniedError, isOmniError,
} from '../omni-client/errors.js';
import { BMCConfigSpec, BMCConfigurationSpec, MachineRequestStage, MachineRequestStatusSpec, decodeSpec, encodeSpec } from '../omni-client/specs.js';
import type { MessageSchema } from '../omni-client/specs.js';
import { machineFactsFromBmc, runWipes, wipeBlocksRelease } from '../wipe/index.js';
import type { WipeOptions, WipeResult, WipeStrategy } from '../wipe/index.js';
import { announceProviderStatus, Heartbeat, liveProviderIn } from './announce.js';
import type { Timers } from './announce.js';
import { ChangeFeed } from './change-feed.js';
import { describeDuration, describeHolds, nextStepsOf, predictHolds, stillHolding } from './explain.js';
import type { HoldFacts } from './explain.js';
import { Limiter } from './limiter.js';
import { isOurFinalizer, ourFinalizers } from './ownership.js';
import type { DisposeStep, Plan, PlanItem, Refusal, ReleaseStep, Step } from './plan.js';
import { STUB_MARKER, buildPlan, immediateWrites, releasesCompletely } from './plan.js';
import type { ProfileOption } from './profile.js';
import { PROVISION_CONTROLLER } from './profile.js';
import { takeSnapshot } from './snapshot.js';
import { FinalizerWaiter } from './waiter.js';

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
}

/** Machine-level items of this run so far, by how they ended; `remaining` = planned, not ended yet. */
export interface ReconcileProgress {
  released: number;
  /** New MachineRequests refused (a FAILED status written) by this run. */
  refused: number;
  blocked: number;
  /** Items and refusals that failed (or were interrupted). */
  failed: number;
  /** Machines in use that the latest plan leaves alone: with --wait, what the run waits for. */
  running: number;
  /** Items under way that wait for Omni to clear its own finalizers. */
  waiting: number;
  remaining: number;
  /** With --wait: how long until --timeout, when this was reported. */
  timeLeftMs?: number;
}

/** One item as it ended, for a person's display. */
export interface ItemEnded {
  kind: string;
  id: string;
  status: ItemStatus | 'refused';
  reason?: string;
}

export type ItemStatus = 'released' | 'blocked' | 'failed' | 'interrupted';

export interface ItemOutcome {
  kind: PlanItem['kind'];
  id: string;
  status: ItemStatus;
  reason?: string;
  nextStep?: string;
  wipe?: WipeResult;
  /**
   * Released, but these finalizers of others still hold it (reason and nextStep explain them): when
   * it was released, or after the settle time if `settle` says so.
   */
  heldBy?: string[];
  /** What watching it after the last write showed (only for what others still held when released). */
  settle?: ItemSettle;
  /** Whether a non-released outcome means the stub's own work is unfinished (exit 5). */
  counts: boolean;
}

export interface ItemSettle {
  /** How long it was watched (0: --settle 0, not watched). */
  ms: number;
  /** gone: destroyed within that time; held: still there after it; not-watched; watch-failed (`error`). */
  outcome: 'gone' | 'held' | 'not-watched' | 'watch-failed';
  error?: string;
}

/** What the settle after the last write watched, and what it found. */
export interface SettleSummary {
  ms: number;
  /** What there was to watch: released while others held it, or left to Omni to let go (counted with ms 0 too). */
  items: number;
  gone: number;
  held: number;
}

export interface RefusalOutcome {
  kind: Refusal['kind'];
  id: string;
  reason: string;
  result: 'refused' | 'already-refused' | 'no-finalizers' | 'failed';
  error?: string;
}

export interface ReconcileResult {
  /** The plans as read; the steps of the items that were run are emptied once each has its outcome. */
  firstPlan: Plan;
  lastPlan: Plan;
  outcomes: ItemOutcome[];
  refusals: RefusalOutcome[];
  announced: boolean;
  heartbeats: number;
  deregistered: boolean;
  declined: boolean;
  timedOut: boolean;
  interrupted: boolean;
  passes: number;
  settle: SettleSummary;
}

const DEFAULT_OMNI_WAIT_MS = 60_000;
/** Omni's controllers let go within the same second when nothing holds them (issue 16): a few seconds. */
export const DEFAULT_SETTLE_MS = 5_000;
const RECHECK_MS = 30_000;

export async function reconcile(deps: ReconcileDeps, o: ReconcileOptions): Promise<ReconcileResult> {
  return new Reconciler(deps, o).run();
}

type StepResult = { done: true } | { done: false; reason: string; nextStep: string; counts: boolean };
const DONE: StepResult = { done: true };

class Reconciler {
  private readonly state: State;
  private readonly log: Logger;
  private readonly id: string;
  private readonly whole: boolean;
  private readonly limiter: Limiter;
  private readonly wipeLimiter: Limiter;
  private readonly window: ItemWindow;
  private readonly waiter: FinalizerWaiter;
  private readonly monotonic: () => number;
  /** --timeout's end; the time a person takes to answer the confirmation is added (run). */
  private deadline: number;
  private readonly outcomes = new Map<string, ItemOutcome>();
  /** Machine-level items planned so far and counts of their outcomes, kept up to date for progress. */
  private readonly tracked = new Set<string>();
  private readonly tally = { released: 0, blocked: 0, failed: 0 };
  /** Refusals written and refusals that failed, machines in use (latest plan), items waiting for Omni. */
  private readonly others = { refused: 0, refusalsFailed: 0, running: 0, waiting: 0 };
  private readonly refusals = new Map<string, RefusalOutcome>();
  private readonly blockedKeys = new Set<string>();
  /** Items released while finalizers of others stayed on them: what to watch after the last write. */
  private readonly heldAtRelease = new Map<string, { target: Pointer; facts: HoldFacts }>();
  private settled: SettleSummary;
  private heartbeat: Heartbeat | undefined;
  private feed: ChangeFeed | undefined;
  private announced = false;
  private deregistered = false;
  /** Set when a heartbeat on the interval found that the real provider is back: the run stops. */
  private liveProvider: Error | undefined;

  constructor(private readonly deps: ReconcileDeps, private readonly o: ReconcileOptions) {
    this.state = deps.state;
    this.log = deps.logger;
    this.id = o.providerId;
    this.whole = o.machines.length === 0;
    this.limiter = new Limiter(o.concurrency);
    this.wipeLimiter = new Limiter(deps.wipe?.options.concurrency ?? 1);
    this.window = new ItemWindow(Math.max(MIN_WINDOW, WINDOW_PER_SLOT * o.concurrency));
    this.waiter = new FinalizerWaiter(this.state, o.signal);
    this.monotonic = deps.monotonic ?? (() => performance.now());
    this.deadline = this.monotonic() + o.timeoutMs;
    this.settled = { ms: o.settleMs ?? DEFAULT_SETTLE_MS, items: 0, gone: 0, held: 0 };
  }

  private async planNow(): Promise<Plan> {
    const snap = await takeSnapshot(this.state, { providerId: this.id, profile: this.o.profile, stateTypes: this.o.stateTypes, signal: this.o.signal, checkParents: this.whole, concurrency: this.o.concurrency });
    return buildPlan(snap, { providerId: this.id, machines: this.o.machines, deregister: this.o.deregister, wipe: this.deps.wipe !== undefined && this.deps.wipe.strategy.name !== 'none' });
  }

  async run(): Promise<ReconcileResult> {
    let plan = await this.planNow();
    const firstPlan = plan;
    const result = (extra: Partial<ReconcileResult>, passes: number): ReconcileResult => ({
      firstPlan,
      lastPlan: plan,
      outcomes: [...this.outcomes.values()],
      refusals: [...this.refusals.values()],
      announced: this.announced,
      heartbeats: this.heartbeat?.beats ?? 0,
      deregistered: this.deregistered,
      declined: false,
      timedOut: false,
      interrupted: false,
      passes,
      settle: this.settled,
      ...extra,
    });
    if (this.o.confirm && this.wouldAct(plan)) {
      const asked = this.monotonic();
      const yes = await this.o.confirm(plan);
      // --timeout is for the run: a person who read the plan for ten minutes did not use it up.
      this.deadline += this.monotonic() - asked;
      if (!yes) return result({ declined: true }, 0);
    }
    let pass = 0;
    let timedOut = false;
    try {
      if (this.o.wait) this.feed = new ChangeFeed(this.state, watchedKinds(), this.o.signal);
      for (pass = 1; ; pass++) {
        this.log.debug({ pass, items: plan.items.length, refusals: plan.refusals.length, deregistration: plan.deregistration.status }, 'pass');
        if (this.liveProvider) throw this.liveProvider;
        if (this.whole && !this.announced && (plan.announce || this.waitsFor(plan))) await this.announce(plan);
        const parents = await this.apply(plan, pass);
        if (this.deregistered) break;
        if (!this.o.wait) {
          if (!(this.whole && this.o.deregister && parents.length > 0 && pass < 3)) break;
          // Omni destroys what we released; then the leftovers and the deregistration can follow.
          await Promise.all(parents.map((p) => this.waiter.wait(p, 'gone', this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS)));
          plan = await this.planNow();
          continue;
        }
        if (finishedWaiting(plan, this.whole, this.o.deregister)) break;
        const left = this.deadline - this.monotonic();
        if (left <= 0) { timedOut = true; break; }
        await this.feed!.next(Math.min(left, RECHECK_MS));
        if (this.o.signal?.aborted) throw this.o.signal.reason ?? new Error('aborted');
        plan = await this.planNow();
      }
      if (this.o.wait && !timedOut && !this.deregistered && !finishedWaiting(plan, this.whole, this.o.deregister)) timedOut = true;
      await this.settle(plan);
    } catch (err) {
      if (!this.o.signal?.aborted) throw err;
      for (const oc of this.outcomes.values()) if (oc.status === 'failed' && oc.reason?.includes('cancel')) oc.status = 'interrupted';
      return result({ interrupted: true }, pass);
    } finally {
      this.feed?.close();
      this.waiter.close();
      await this.heartbeat?.stop();
    }
    return result({ timedOut }, pass);
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

  private getIfExists(p: Pointer): Promise<Resource | undefined> {
    return getIfExists(this.state, p, { signal: this.o.signal });
  }

  private async announce(plan: Plan): Promise<void> {
    const ctx = { state: this.state, providerId: this.id, version: this.deps.version, logger: this.log, signal: this.o.signal };
    const current = await this.getIfExists({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: this.id });
    // The static label from the facts (InfraMachines exist, or --profile bare-metal), not from the profile flag alone.
    const wrote = await announceProviderStatus(ctx, current, plan.profile.staticLabel);
    this.heartbeat = new Heartbeat({ ...ctx, now: this.deps.now ?? Date.now, force: this.o.force === true, onLiveProvider: (err) => { this.liveProvider = err; }, ...(this.deps.timers ? { timers: this.deps.timers } : {}), ...(this.deps.heartbeatMs ? { intervalMs: this.deps.heartbeatMs } : {}) });
    await this.heartbeat.start();
    this.announced = true;
    this.log.info({ providerId: this.id, wroteProviderStatus: wrote }, 'announced stub mode: ProviderStatus says decommissioning; heartbeats every 30 s');
  }

  /** Runs every item and refusal of the plan; returns the parents it released (for Omni to destroy). */
  private async apply(plan: Plan, pass: number): Promise<Pointer[]> {
    const parents: Pointer[] = [];
    const items = plan.items.filter((it) => this.o.wait || pass === 1 || !this.blockedKeys.has(keyOf(it)));
    this.track(items, plan.running.length);
    await Promise.all([
      this.runWindowed(items, async (item) => {
        let released: boolean;
        try {
          released = await this.runItem(item);
        } finally {
          this.window.leave();
        }
        // Only what Omni destroys at once (no finalizer of anyone else left, or only Omni's that let
        // go by themselves) is worth waiting for.
        const last = item.steps.at(-1);
        if (released && last?.op === 'release' && releasesCompletely(item)) parents.push(pointerOf(last.target));
        // Its steps hold the resources as read (specs included); nothing needs them once the item has
        // its outcome, and keeping them kept the whole snapshot alive until the end of the run.
        item.steps = [];
      }),
      ...(this.whole ? plan.refusals.map((r) => this.refuse(r)) : []),
    ]);
    if (this.o.signal?.aborted) throw this.o.signal.reason ?? new Error('aborted');
    if (this.whole && plan.deregistration.status === 'ready' && plan.deregistration.item) {
      await this.deregister(plan.deregistration.item);
    }
    return parents;
  }

  /**
   * Starts each item once it has a place in the window, in plan order, and resolves when all are
   * done. Items are started one by one instead of all queued at once: at 10 000 machines the queue
   * held 11 000 suspended functions for the whole pass, and an item coming back from a wait
   * (`outside`) queued behind every item not yet started.
   */
  private async runWindowed(items: PlanItem[], run: (item: PlanItem) => Promise<void>): Promise<void> {
    const running = new Set<Promise<void>>();
    let failure: { err: unknown } | undefined;
    for (const item of items) {
      await this.window.enter();
      if (failure) {
        // An unexpected error (items catch their own): start nothing more, let the others finish.
        this.window.leave();
        break;
      }
      const p: Promise<void> = run(item).catch((err: unknown) => { failure ??= { err }; }).finally(() => running.delete(p));
      running.add(p);
    }
    await Promise.all(running);
    if (failure) throw failure.err;
  }

  private async runItem(item: PlanItem, steps: Step[] = item.steps): Promise<boolean> {
    const key = keyOf(item);
    const outcome: ItemOutcome = { kind: item.kind, id: item.id, status: 'released', counts: true };
    try {
      for (const step of steps) {
        const r = await this.runStep(step, outcome);
        if (!r.done) {
          Object.assign(outcome, { status: 'blocked', reason: r.reason, nextStep: r.nextStep, counts: r.counts });
          this.blockedKeys.add(key);
          this.record(key, outcome);
          this.itemLog('warn', { kind: item.kind, id: item.id, reason: r.reason, nextStep: r.nextStep }, 'blocked');
          return false;
        }
      }
      this.blockedKeys.delete(key);
      const last = steps.at(-1);
      if (last?.op === 'release' && last.holds) {
        // Released by us, but someone else's finalizer still holds it: say who and why, and watch it
        // after the last write (settle).
        const holds = predictHolds(last.holds);
        Object.assign(outcome, { heldBy: [...last.holds.remaining], reason: describeHolds(holds), nextStep: nextStepsOf(holds) });
        this.heldAtRelease.set(key, { target: pointerOf(last.target), facts: last.holds });
      }
      this.record(key, outcome);
      this.itemLog('info', { kind: item.kind, id: item.id }, item.kind === 'leftover' ? 'cleaned up' : 'released');
      return true;
    } catch (err) {
      const aborted = this.o.signal?.aborted === true;
      const nextStep = err instanceof NotFoundUnconfirmedError ? err.nextStep : 'run again; if it keeps failing, check the error and Omni\'s logs';
      Object.assign(outcome, { status: aborted ? 'interrupted' : 'failed', reason: (err as Error).message, nextStep: aborted ? 'run again' : nextStep });
      this.record(key, outcome);
      if (!aborted) this.itemLog('error', { kind: item.kind, id: item.id, err: (err as Error).message }, 'failed');
      return false;
    }
  }

  /**
   * Stores an item's outcome and keeps the progress counts in step (O(1) per item). A machine-level
   * item or the deregistration is shown when it ends, and again only when it ends otherwise (with
   * --wait a blocked item is tried again on every pass).
   */
  private record(key: string, outcome: ItemOutcome): void {
    const prev = this.outcomes.get(key);
    const tracked = this.tracked.has(key);
    if (tracked) {
      if (prev) this.tally[tallyOf(prev.status)]--;
      this.tally[tallyOf(outcome.status)]++;
    }
    this.outcomes.set(key, outcome);
    const shown = (tracked || outcome.kind === 'deregistration') && prev?.status !== outcome.status;
    this.reportProgress(shown ? { kind: outcome.kind, id: outcome.id, status: outcome.status, ...(outcome.reason ? { reason: outcome.reason } : {}) } : undefined);
  }

  private track(items: PlanItem[], running: number): void {
    if (!this.deps.progress) return;
    for (const item of items) if (MACHINE_LEVEL.has(item.kind)) this.tracked.add(keyOf(item));
    this.others.running = running;
    this.reportProgress();
  }

  private reportProgress(ended?: ItemEnded): void {
    const progress = this.deps.progress;
    if (!progress) return;
    const { released, blocked, failed } = this.tally;
    const { refused, refusalsFailed, running, waiting } = this.others;
    progress({
      released, refused, blocked, failed: failed + refusalsFailed, running, waiting, remaining: this.tracked.size - released - blocked - failed,
      ...(this.o.wait ? { timeLeftMs: Math.max(0, this.deadline - this.monotonic()) } : {}),
    }, ended);
  }

  /** A per-item log line, at its own level or at deps.itemLogLevel (debug where a display shows the items). */
  private itemLog(level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void {
    this.log[this.deps.itemLogLevel ?? level](fields, msg);
  }

  /** Counts an item waiting for Omni while `fn` runs (the progress line's "waiting"). */
  private async waitingFor<T>(fn: () => Promise<T>): Promise<T> {
    this.others.waiting++;
    this.reportProgress();
    try {
      return await fn();
    } finally {
      this.others.waiting--;
      this.reportProgress();
    }
  }

  private runStep(step: Step, outcome: ItemOutcome): Promise<StepResult> {
    switch (step.op) {
      case 'wipe': return this.wipe(step.machineId, step.bmcConfiguration, step.bmcConfig, outcome);
      case 'release': return this.release(step);
      case 'dispose': return this.dispose(step);
    }
  }

  private async wipe(machineId: string, bmcConfiguration: Resource | undefined, bmcConfig: Resource | undefined, outcome: ItemOutcome): Promise<StepResult> {
    const w = this.deps.wipe;
    if (!w) return DONE;
    const facts = machineFactsFromBmc(machineId, this.id, decodeOrUndefined(BMCConfigurationSpec, bmcConfiguration), decodeOrUndefined(BMCConfigSpec, bmcConfig));
    const [res] = await this.window.outside(() => this.wipeLimiter.run(() => runWipes(w.strategy, [facts], { concurrency: 1, timeoutMs: w.options.timeoutMs, logger: this.log, ...(this.o.signal ? { signal: this.o.signal } : {}) })));
    if (!res) return DONE;
    outcome.wipe = res;
    if (wipeBlocksRelease(res, w.options)) {
      return { done: false, reason: `wipe ${res.outcome}${res.reason ? `: ${res.reason}` : ''} (--require-wipe keeps the machine's finalizers)`, nextStep: 'fix the BMC access or the wipe command and run again, or run without --require-wipe', counts: true };
    }
    return DONE;
  }

  private async release(step: ReleaseStep): Promise<StepResult> {
    const { target, finalizers } = step;
    const p = target.metadata;
    // requirePhase: a retry after a conflict re-reads; if the resource was meanwhile destroyed and
    // re-created (running), it is no longer a deletion under way and must not be released (rule 2).
    const res = await this.limiter.run(() => this.state.removeFinalizers(target, finalizers, { signal: this.o.signal, requirePhase: p.phase }));
    if (res.outcome !== 'removed') this.log.debug({ resource: describePointer(p), finalizers, outcome: res.outcome }, 'remove finalizers: nothing written');
    if (res.outcome === 'not-found' && !step.foundById && !this.waiter.sawById(p)) throw new NotFoundUnconfirmedError(p, 'Update');
    if (res.outcome === 'phase-changed') {
      return { done: false, reason: `${describePointer(p)} is ${res.before?.metadata.phase ?? 'in another phase'} now (re-created meanwhile?): left alone`, nextStep: 'check who re-created it; run again to re-plan', counts: false };
    }
    return DONE;
  }

  /**
   * Our finalizers off (one Update), teardown and wait only if someone else holds it, Destroy as owner.
   * NotFound at any call is done once something read this resource by its ID (design rule 4): the
   * plan (a Get in the snapshot), a Get or a write of this step that succeeded, or a watch event
   * naming it. Before that it may never have existed under this ID: the step fails.
   */
  private async dispose(step: DisposeStep): Promise<StepResult> {
    const target = step.target;
    const p: Pointer = pointerOf(target);
    let found = step.foundById;
    const notFound = (call: string): StepResult => {
      if (found || this.waiter.sawById(p)) return DONE;
      throw new NotFoundUnconfirmedError(p, call);
    };
    let cur = target;
    let lastErr: unknown;
    for (let attempt = 1; attempt <= 4; attempt++) {
      const mine = ourFinalizers(cur.metadata, this.id);
      if (mine.length > 0) {
        const res = await this.limiter.run(() => this.state.removeFinalizers(cur, mine, { signal: this.o.signal }));
        if (res.outcome === 'gone') return DONE;
        if (res.outcome === 'not-found') return notFound('Update');
        // Removed (a write by this ID succeeded), or a re-read found it: read by its ID either way.
        if (res.outcome === 'removed' || res.before !== cur) found = true;
        cur = res.after ?? res.before ?? cur;
      }
      if (cur.metadata.finalizers.length > 0) {
        const foreign = [...cur.metadata.finalizers];
        let ready = false;
        const minVersion = String(BigInt(cur.metadata.version === 'undefined' ? '0' : cur.metadata.version) + 1n);
        if (cur.metadata.phase === PHASE_RUNNING) {
          try {
            ready = await this.limiter.run(() => this.state.teardown(p, { signal: this.o.signal }));
          } catch (err) {
            // Thrown only when its Get found nothing (state.ts).
            if (isOmniError(err, NotFoundError)) return notFound('Get');
            throw err;
          }
          found = true; // its Get found it
        }
        if (!ready) {
          const ms = this.o.wait ? Math.max(0, this.deadline - this.monotonic()) : (this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS);
          const w = await this.window.outside(() => this.waitingFor(() => this.waiter.wait(p, 'no-finalizers', ms, minVersion)));
          // A DESTROYED event (the watch named it), or the waiter's Get of its ID answering NotFound.
          if (w === 'gone') return notFound('a Get while waiting for Omni');
          if (w === 'aborted') throw this.o.signal?.reason ?? new Error('aborted');
          if (w === 'timeout') {
            const holds = this.holdsNow(p, step.holds ?? { providerId: this.id, remaining: foreign, uuid: p.id });
            return { done: false, reason: `${describePointer(p)} still held after ${describeDuration(ms)} by ${describeHolds(holds)}`, nextStep: nextStepsOf(holds), counts: true };
          }
        }
      }
      try {
        await this.limiter.run(() => this.state.destroy(p, { owner: cur.metadata.owner, signal: this.o.signal, before: cur }));
        return DONE;
      } catch (err) {
        if (isOmniError(err, NotFoundError)) return notFound('Destroy');
        // Finalizers added or the owner changed since we read it: read again and start over.
        if (!isOmniError(err, FailedPreconditionError) && !isOmniError(err, PermissionDeniedError)) throw err;
        lastErr = err;
        const fresh = await this.getIfExists(p);
        if (!fresh) return notFound('Get');
        found = true;
        cur = fresh;
      }
    }
    throw lastErr;
  }

  /**
   * After a wait: the holds of what a watch of this run saw on the resource last (or, unseen, of
   * `facts`), ours left out; what was to let go by itself and did not is said so.
   */
  private holdsNow(p: Pointer, facts: HoldFacts): ReturnType<typeof predictHolds> {
    const now = this.waiter.finalizersOf(p);
    const remaining = Array.isArray(now) ? now.filter((f) => !isOurFinalizer(f, this.id)) : facts.remaining;
    return stillHolding(predictHolds({ ...facts, remaining }));
  }

  /**
   * After the last write: watch, for at most `settleMs` and through the shared kind watches, each item
   * that finalizers of others still held when it was released (issue 16: Omni's controllers let go
   * within the same second when nothing holds them). Gone: plainly released. Still there: held by
   * what the watch saw on it last. Also the deletions of the last plan that only Omni's finalizers
   * hold and that it should let go by itself: still there at the end, they are reported blocked.
   * Nothing here writes or decides anything; it is what the report says.
   */
  private async settle(plan: Plan): Promise<void> {
    const held = [...this.heldAtRelease].flatMap(([key, h]) => {
      const o = this.outcomes.get(key);
      return o?.status === 'released' && o.heldBy ? [{ o, ...h }] : [];
    });
    // Deletions that nothing of ours held, left to Omni (plan.lettingGo): blocked only if still held.
    const reported = new Set([...this.outcomes.values()].map((o) => `${o.kind}/${o.id}`));
    for (const n of plan.lettingGo) {
      const key = `${n.kind}/${n.id}`;
      if (!n.heldByOthers || reported.has(key)) continue;
      const holds = predictHolds(n.heldByOthers.facts);
      const o: ItemOutcome = { kind: n.kind as ItemOutcome['kind'], id: n.id, status: 'blocked', reason: describeHolds(holds), nextStep: nextStepsOf(holds), heldBy: [...n.heldByOthers.facts.remaining], counts: false };
      this.outcomes.set(key, o);
      held.push({ o, ...n.heldByOthers });
    }
    const ms = this.settled.ms;
    this.settled.items = held.length;
    if (held.length === 0) return;
    if (ms <= 0) {
      for (const { o } of held) o.settle = { ms: 0, outcome: 'not-watched' };
      return;
    }
    this.log.debug({ items: held.length, ms }, 'settle: watching what others still held when released');
    const ends = await Promise.all(held.map(({ target }) => this.waiter.wait(target, 'gone', ms).catch((err: unknown) => err as Error)));
    held.forEach(({ o, target, facts }, i) => {
      const end = ends[i]!;
      if (end === 'aborted') return;
      if (end instanceof Error) {
        o.settle = { ms, outcome: 'watch-failed', error: end.message };
        return;
      }
      if (end === 'gone' || this.waiter.finalizersOf(target) === 'gone') {
        this.settled.gone++;
        // Left to Omni and gone: nothing to report. Released and gone: plainly released.
        if (o.status === 'blocked') this.outcomes.delete(`${o.kind}/${o.id}`);
        o.settle = { ms, outcome: 'gone' };
        delete o.heldBy;
        delete o.reason;
        delete o.nextStep;
        return;
      }
      const holds = this.holdsNow(target, facts);
      o.settle = { ms, outcome: 'held' };
      o.heldBy = holds.map((h) => h.finalizer);
      o.reason = holds.length > 0 ? describeHolds(holds) : `no finalizer left on ${describePointer(target)}, but Omni had not destroyed it`;
      o.nextStep = holds.length > 0 ? nextStepsOf(holds) : 'check Omni\'s logs, and run again';
      this.settled.held++;
      this.log.warn({ kind: o.kind, id: o.id, heldBy: o.heldBy, afterMs: ms }, 'still held after the settle time');
    });
    if (this.o.signal?.aborted) throw this.o.signal.reason ?? new Error('aborted');
  }

  private async refuse(r: Refusal): Promise<void> {
    const key = `${r.kind}/${r.id}`;
    if (r.done || !r.request) {
      if (!this.refusals.has(key)) this.refusals.set(key, { kind: r.kind, id: r.id, reason: r.reason, result: r.kind === 'InfraMachine' ? 'no-finalizers' : 'already-refused' });
      return;
    }
    const md = newMetadata({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus, id: r.id }, { labels: { ...r.request.metadata.labels } });
    const spec = encodeSpec(MachineRequestStatusSpec, { id: '', stage: MachineRequestStage.FAILED, error: refusalError(this.id, r.id), status: `refused by ${STUB_MARKER}` });
    try {
      await this.limiter.run(() => this.state.create({ metadata: md, spec: { protoSpec: spec } }, { owner: `${this.id}.${PROVISION_CONTROLLER}`, signal: this.o.signal }));
      this.refusals.set(key, { kind: r.kind, id: r.id, reason: r.reason, result: 'refused' });
      this.others.refused++;
      this.itemLog('info', { kind: r.kind, id: r.id }, 'refused new MachineRequest (FAILED status)');
      this.reportProgress({ kind: r.kind, id: r.id, status: 'refused' });
    } catch (err) {
      if (isOmniError(err, AlreadyExistsError)) {
        this.refusals.set(key, { kind: r.kind, id: r.id, reason: 'a status appeared meanwhile', result: 'already-refused' });
        return;
      }
      if (this.o.signal?.aborted) throw err;
      this.refusals.set(key, { kind: r.kind, id: r.id, reason: r.reason, result: 'failed', error: (err as Error).message });
      this.others.refusalsFailed++;
      this.itemLog('error', { kind: r.kind, id: r.id, err: (err as Error).message }, 'refusal failed');
      this.reportProgress({ kind: r.kind, id: r.id, status: 'failed', reason: `refusal failed: ${(err as Error).message}` });
    }
  }

  private async deregister(item: PlanItem): Promise<void> {
    await this.checkNoLiveProvider();
    const last = new Set<string>([T.InfraProviderStatus, T.InfraProviderHealthStatus]);
    const rest = item.steps.filter((s) => s.op !== 'dispose' || !last.has(s.target.metadata.type));
    const finals = item.steps.filter((s) => s.op === 'dispose' && last.has(s.target.metadata.type));
    const results = await Promise.all(rest.map((s) => this.runItem({ kind: 'leftover', id: s.op === 'wipe' ? s.machineId : s.target.metadata.id, reason: item.reason, steps: [s] })));
    if (results.some((ok) => !ok)) {
      this.outcomes.set(keyOf(item), { kind: 'deregistration', id: this.id, status: 'blocked', reason: 'some of the provider\'s resources could not be destroyed', nextStep: 'see the items above and run again', counts: true });
      return;
    }
    await this.heartbeat?.stop();
    this.heartbeat = undefined;
    const ok = await this.runItem(item, await this.statusSteps(finals));
    this.deregistered = ok;
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
    const current = await this.getIfExists({ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: this.id });
    const live = liveProviderIn(current, this.id, (this.deps.now ?? Date.now)());
    if (live) throw live;
  }

  /**
   * The heartbeat, then the ProviderStatus: as planned, or read now when the plan did not list them
   * because this run created them after it was read (the announcement). Both go, whoever wrote them.
   */
  private async statusSteps(planned: Step[]): Promise<Step[]> {
    const steps: Step[] = [];
    for (const p of [{ namespace: NS_INFRA_PROVIDER_EPHEMERAL, type: T.InfraProviderHealthStatus, id: this.id }, { namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: this.id }]) {
      const step = planned.find((s) => s.op === 'dispose' && s.target.metadata.type === p.type);
      const target = step ? undefined : await this.getIfExists(p);
      if (step) steps.push(step);
      else if (target) steps.push({ op: 'dispose', target, removeFinalizers: ourFinalizers(target.metadata, this.id), teardown: false, waitFor: [], why: 'deregistration: written by this run', foundById: true });
    }
    return steps;
  }
}

/**
 * Items between two calls at once, per call slot: enough to keep every slot busy, few enough that a
 * step's results are not held through a queue of every machine of the fleet. With all 11 000 items
 * of a 10 000-machine run in the limiter's queue at once, each step waited seconds for the next,
 * what it had read went to V8's old space, and the heap grew by ~25 MB/s of such garbage (485 MB
 * peak for a 130 MB live set).
 */
const WINDOW_PER_SLOT = 4;
const MIN_WINDOW = 256;

/**
 * Bounds how many plan items are under way at once. An item leaves it while it waits for Omni or a
 * wipe (`outside`), so that slow or stuck resources never hold back the others. A soft bound: an
 * item outside the window (deregistration) may pass through `outside` and briefly add one.
 */
class ItemWindow {
  private free: number;
  private readonly queue: ((() => void) | undefined)[] = [];
  private head = 0;

  constructor(size: number) {
    this.free = size;
  }

  async enter(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.queue.push(resolve));
  }

  leave(): void {
    if (this.head < this.queue.length) {
      const next = this.queue[this.head];
      this.queue[this.head++] = undefined;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      next?.(); // the place passes straight to the next item
    } else {
      this.free++;
    }
  }

  async outside<T>(fn: () => Promise<T>): Promise<T> {
    this.leave();
    try {
      return await fn();
    } finally {
      await this.enter();
    }
  }
}

const MACHINE_LEVEL = new Set<PlanItem['kind']>(['InfraMachine', 'MachineRequest', 'BMCConfig']);

function tallyOf(status: ItemStatus): 'released' | 'blocked' | 'failed' {
  return status === 'interrupted' ? 'failed' : status;
}

/**
 * An item's identity across passes. A machine-level item is its kind and ID, however many of its
 * steps a later pass still plans (keyed by its last step's resource, a machine that failed in
 * two passes was reported failed twice and counted twice); a leftover is the resource it destroys.
 */
function keyOf(item: PlanItem): string {
  if (MACHINE_LEVEL.has(item.kind)) return `${item.kind}/${item.id}`;
  return `${item.kind}/${item.steps.length === 1 && item.steps[0]!.op !== 'wipe' ? describePointer(item.steps[0]!.target.metadata) : item.id}`;
}

/**
 * A write or read answered NotFound for a resource nothing had read by exactly that ID (it came from
 * a List only): not taken for done (design rule 4). The item fails; the run exits 5.
 */
export class NotFoundUnconfirmedError extends StubError {
  readonly nextStep: string;
  constructor(p: Pointer, call: string) {
    super('STUB_NOT_FOUND_UNCONFIRMED', ExitCode.Incomplete, `${describePointer(p)}: ${call} answered NotFound, but nothing read this resource by its ID before (it came from a List only), so it is not taken for done`);
    this.name = 'NotFoundUnconfirmedError';
    this.nextStep = 'run again (the next run lists it afresh); if it keeps failing, check what answers in front of Omni (a proxy or gateway rewriting answers)';
  }
}

export function refusalError(providerId: string, requestId: string): string {
  return `${STUB_MARKER}: provider ${providerId} is being decommissioned and accepts no new machines; request ${requestId} is refused`;
}

/** Whether a plan would change anything (so a confirmation is due). */
export function hasWork(plan: Plan): boolean {
  return immediateWrites(plan) > 0 || plan.announce || plan.deregistration.status === 'ready' || plan.items.length > 0;
}

function finishedWaiting(plan: Plan, whole: boolean, deregister: boolean): boolean {
  if (plan.items.length > 0 || plan.running.length > 0) return false;
  if (!whole) return true;
  if (deregister) return plan.deregistration.status === 'done';
  return plan.refusals.every((r) => r.done) && !plan.deregistration.reasons.some((r) => /InfraMachine|MachineRequest|Machine /.test(r));
}

function watchedKinds() {
  return [
    { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine },
    { namespace: NS_INFRA_PROVIDER, type: T.MachineRequest },
    { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus },
    { namespace: NS_INFRA_PROVIDER, type: T.BMCConfig },
    { namespace: NS_DEFAULT, type: T.Machine },
  ];
}

function decodeOrUndefined<V>(schema: MessageSchema<V>, r: Resource | undefined): V | undefined {
  if (!r) return undefined;
  try {
    return decodeSpec(schema, r.spec.protoSpec).value;
  } catch {
    return undefined;
  }
}
