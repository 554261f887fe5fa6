// src/provider/run: a run's effects, pass by pass (this file). Each pass plans from the run's caches
// and applies the plan (apply.ts: its items through the executor, its refusals, its deregistration);
// stub mode and its heartbeat, the items' runs, their operations, --timeout, --settle and the checks
// before any write each have a file of their own (docs/architecture.md lists them).
//
// A run plans (snapshot.ts, planner.ts) and applies, per machine in the order of docs/design.md rule 5,
// all machines at once with at most `--concurrency` calls in flight (the client's limit,
// omni-client/call-limit.ts); waits for Omni through the run's caches; refuses new registrations and
// announces stub mode in whole-provider mode only; deregisters once nothing of the ID is left; after
// the last write, watches what others still held for --settle. Every read of Omni's collections is a
// query on the run's caches (cache.ts: one List and one Watch per kind). Without --wait a run plans
// again only after Omni destroyed what it released; with --wait, on every change its caches see,
// until everything is released or --timeout passed.

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Pointer } from '../../omni-api/resource.js';
import { describePointer } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import type { Plan, PlanOptions, Snapshot } from '../plan/plan.js';
import { buildPlan } from '../plan/planner.js';
import { followedKinds, hasWork, withoutResources } from '../plan/plan.js';
import { ProviderCache } from '../read/cache.js';
import { takeSnapshot } from '../read/snapshot.js';
import { PassApplier } from './apply.js';
import { confirmByGet } from './confirm.js';
import type { ReconcileDeps, ReconcileOptions, ReconcileResult } from './contract.js';
import {
  Deadline,
  DEREGISTER_GRACE_MS,
  finishedWaiting,
  onlyDeregistrationLeft,
  onlyOmniLeft,
  remainingAt,
  type Remaining,
} from './deadline.js';
import { Halt } from './halt.js';
import { ItemRunner } from './item-run.js';
import { Outcomes, keyOf } from './outcomes.js';
import { settle } from './settle.js';
import type { SettleSummary } from './settle.js';
import { StubMode } from './stub-mode.js';

const DEFAULT_OMNI_WAIT_MS = 60_000;
/** Omni's controllers let go within the same second when nothing holds them (docs/omni-behaviour.md): a few seconds. */
export const DEFAULT_SETTLE_MS = 5_000;
/** How long the heartbeat's 'ended' mark may take after SIGINT or SIGTERM. */
const MARK_ENDED_AFTER_SIGNAL_MS = 1_000;
const RECHECK_MS = 30_000;

export async function reconcile(deps: ReconcileDeps, o: ReconcileOptions): Promise<ReconcileResult> {
  return new Reconciler(deps, o).run();
}

class Reconciler {
  private readonly state: State;
  private readonly log: Logger;
  private readonly id: string;
  private readonly whole: boolean;
  /** The run's caches of Omni's collections, and what its own calls answered. */
  private readonly reads: ProviderCache;
  private readonly monotonic: () => number;
  private readonly planOptions: PlanOptions;
  /** --timeout's end (deadline.ts); the time a person takes to answer the confirmation is added (run). */
  private readonly deadline: Deadline;
  private readonly outcomes: Outcomes;
  /** What the run released for Omni to destroy: read again by ID before a report says it is still there. */
  private readonly releasedParents = new Map<string, Pointer>();
  private readonly settled: SettleSummary;
  /** The snapshot the current plan was made from (the planner's input again when an item is planned anew). */
  private pass: Snapshot | undefined;
  /** The last plan made (an interruption reports its items never started as such). */
  private latest: Plan | undefined;
  /** What cancels every call and wait of the run: the operator's signal, or the run's own halt. */
  private readonly halt: Halt;
  /** The heartbeat and the ProviderStatus (whole-provider mode), and what the beats found. */
  private readonly stubMode: StubMode;
  /** The items' runs: their ranks, which ended blocked, which others still held when released. */
  private readonly itemRunner: ItemRunner;
  /** One plan applied: its items, refusals and deregistration. */
  private readonly applier: PassApplier;
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
    this.halt = new Halt(o.signal);
    this.reads = new ProviderCache(this.state, {
      providerId: this.id,
      live: true,
      logger: this.log,
      signal: this.halt.signal,
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
    this.stubMode = new StubMode({
      run: deps,
      providerId: this.id,
      runId: this.runId,
      signal: this.halt.signal,
      force: o.force === true,
      beatsLeftMs: () => (o.wait ? this.deadline.leftMs() : Infinity),
    });
    this.itemRunner = new ItemRunner({ outcomes: this.outcomes, halt: this.halt, stubMode: this.stubMode });
    this.applier = new PassApplier({
      run: deps,
      providerId: this.id,
      runId: this.runId,
      whole: this.whole,
      wait: o.wait,
      omniWaitMs: o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS,
      concurrency: o.concurrency,
      deadline: this.deadline,
      reads: this.reads,
      outcomes: this.outcomes,
      items: this.itemRunner,
      halt: this.halt,
      stubMode: this.stubMode,
      planOptions: this.planOptions,
    });
  }

  private async planNow(): Promise<Plan> {
    const snap = await takeSnapshot(this.state, {
      providerId: this.id,
      profile: this.o.profile,
      stateTypes: this.o.stateTypes,
      signal: this.halt.signal,
      checkParents: this.whole,
      cache: this.reads,
      ...(this.deps.stage ? { stage: this.deps.stage } : {}),
    });
    this.deps.stage?.('planning');
    const plan = buildPlan(snap, this.planOptions);
    // Without --wait, the events of the kinds the items do not act on are left unread (cache.ts).
    this.reads.follow(this.o.wait ? 'all' : followedKinds(plan));
    this.pass = withoutResources(snap);
    this.deps.planned?.(plan);
    this.latest = plan;
    return plan;
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
      ...(this.stubMode.takenOver ? { takenOver: this.stubMode.takenOver } : {}),
      firstPlan,
      lastPlan: plan,
      outcomes: [...this.outcomes.items.values()],
      refusals: [...this.outcomes.refusals.values()],
      announced: this.stubMode.announced,
      heartbeats: this.stubMode.beats,
      deregistered: this.applier.deregistered,
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
      this.deps.stage?.('confirming');
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
        const scope = { whole: this.whole, deregister: this.o.deregister, deregistered: this.applier.deregistered };
        if (timedOut) remaining = remainingAt(plan, this.outcomes.items, this.outcomes.refusals, scope);
      } else ({ plan, pass } = await this.confirmFacts(plan, pass));
      if (this.o.wait) this.settled.ms = this.deadline.settleMs(this.settled.ms);
      this.deps.stage?.('settling', {
        items: this.itemRunner.heldAtRelease.size + plan.lettingGo.length,
        ms: this.settled.ms,
      });
      const settling = { reads: this.reads, outcomes: this.outcomes, items: this.itemRunner, providerId: this.id };
      await settle({ ...settling, log: this.log, signal: this.halt.signal }, this.settled, plan);
    } catch (err) {
      if (this.halt.fatal) throw this.halt.fatal;
      if (!this.halt.interrupted) throw err;
      // An item under way is 'interrupted' already, judged from the signal where it failed (item-run.ts).
      // What the plan held and the interruption came before: not started, not failed.
      for (const item of (this.latest ?? plan).items)
        if (!this.outcomes.items.has(keyOf(item))) this.itemRunner.notStarted(item);
      return result({ interrupted: true }, pass);
    } finally {
      // Not deregistered (that destroys the heartbeat): marked ended, so the next run need not wait for
      // it; not after --timeout (no write then: the next run waits for it to go stale); after a signal
      // within a second at most, as a stop asks for a prompt exit (docs/operator-guide.md, 'The result on
      // every exit'): if Omni is slower, the next run waits for the heartbeat to go stale.
      await this.stubMode.stopBeats({
        ended: !(this.o.wait && this.deadline.passed()),
        ...(this.halt.interrupted ? { endMs: MARK_ENDED_AFTER_SIGNAL_MS } : {}),
      });
    }
    if (this.stubMode.takenOver) return result({}, pass);
    this.deps.stage?.('done');
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
      if (this.stubMode.liveProvider) throw this.stubMode.liveProvider;
      const announcing = this.whole && !this.stubMode.announced && (plan.announce || this.waitsFor(plan));
      if (announcing) await this.stubMode.announce(plan);
      // What the announcement wrote is not in this plan: its deregistration is planned again first.
      const { parents, deferred } = await this.applier.apply(plan, this.pass!, pass, announcing, this.writesUntil());
      for (const p of parents) this.releasedParents.set(describePointer(p), p);
      const end = { plan, pass };
      if (this.applier.deregistered || this.stubMode.takenOver) return { ...end, timedOut: false };
      if (this.o.wait && this.deadline.passed())
        return { ...end, timedOut: !finishedWaiting(plan, this.whole, this.o.deregister) };
      if (deferred) {
        plan = await this.planNow();
        continue;
      }
      if (!this.o.wait) {
        if (!(this.whole && this.o.deregister && parents.length > 0 && pass < 3)) return { ...end, timedOut: false };
        // Omni destroys what we released; then the leftovers and the deregistration can follow.
        this.deps.stage?.('waiting', { resources: parents.length, ms: this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS });
        await Promise.all(parents.map((p) => this.reads.wait(p, 'gone', this.o.omniWaitMs ?? DEFAULT_OMNI_WAIT_MS)));
        plan = await this.planNow();
        continue;
      }
      if (finishedWaiting(plan, this.whole, this.o.deregister)) return { ...end, timedOut: false };
      const ms = Math.min(this.deadline.leftMs(), RECHECK_MS);
      this.deps.stage?.('waiting', { ms });
      await this.reads.changed(ms);
      this.halt.throwIfInterrupted();
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
    await this.stubMode.stopBeats();
    let plan = await this.planNow();
    // Omni destroys what the run released in its own time: the grace waits for that before judging (bounded by it).
    const graceLeft = () => this.deadline.leftMs() + DEREGISTER_GRACE_MS;
    while (onlyOmniLeft(plan, this.whole, this.o.deregister) && graceLeft() > 0) {
      this.deps.stage?.('waiting', { ms: Math.min(graceLeft(), RECHECK_MS) });
      await this.reads.changed(Math.min(graceLeft(), RECHECK_MS));
      this.halt.throwIfInterrupted();
      plan = await this.planNow();
    }
    if (onlyDeregistrationLeft(plan, this.whole, this.o.deregister)) {
      this.log.info({ graceMs: DEREGISTER_GRACE_MS }, '--timeout passed with everything released: deregistering');
      await this.applier.apply(plan, this.pass!, pass + 1, false, this.deadline.notAfter(DEREGISTER_GRACE_MS));
    }
    return { plan, timedOut: !this.applier.deregistered && !finishedWaiting(plan, this.whole, this.o.deregister) };
  }

  /**
   * After the last pass (design rule 10): what the report would give as a reason (still there, still
   * held) came from the caches, and a kind's watch may have stopped following Omni. What the run
   * released or left held is read again by its ID (confirm.ts); if any of it changed, the run plans
   * once more on what is true now (it may deregister).
   */
  private async confirmFacts(plan: Plan, pass: number): Promise<{ plan: Plan; pass: number }> {
    if (this.applier.deregistered || this.stubMode.takenOver) return { plan, pass };
    const targets = [
      ...this.releasedParents.values(),
      ...[...this.itemRunner.heldAtRelease.values()].map((h) => h.target),
    ];
    const d = { state: this.state, reads: this.reads, log: this.log, signal: this.halt.signal };
    if (!(await confirmByGet(d, targets))) return { plan, pass };
    plan = await this.planNow();
    const dereg = plan.deregistration;
    if (this.whole && dereg.status === 'ready' && dereg.item)
      await this.applier.apply(plan, this.pass!, ++pass, false, this.writesUntil());
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
}
