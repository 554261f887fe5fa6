// One plan applied (the passes that make the plans are reconcile.ts): its items, at most the item
// limiter's width at once and each in its rank's turn, through an executor made for the pass
// (executor.ts); its refusals (whole-provider mode, refusals.ts); then its deregistration
// (deregister.ts) once the plan says it is ready, unless this pass announced stub mode (what that
// wrote is not in the plan). No write after `notAfter`, no item started after --timeout, and a write
// no run can get past stops the run (halt.ts).

import type { Pointer } from '../../omni-api/resource.js';
import type { Plan, PlanOptions, Snapshot } from '../plan/plan.js';
import type { ProviderCache } from '../read/cache.js';
import type { ReconcileDeps } from './contract.js';
import type { Deadline } from './deadline.js';
import { deregister } from './deregister.js';
import { Executor } from './executor.js';
import type { Halt } from './halt.js';
import { NotStartedError } from './item-end.js';
import { isTooLarge } from './item-run.js';
import type { ItemRunner } from './item-run.js';
import { Limiter } from './limiter.js';
import { keyOf } from './outcomes.js';
import type { Outcomes } from './outcomes.js';
import { refuse } from './refusals.js';
import type { StubMode } from './stub-mode.js';

/** A wipe claim holds for the wipe's timeout and this much more (wipe-claim.ts). */
const WIPE_CLAIM_MARGIN_MS = 60_000;

export interface ApplierDeps {
  /** The client's State, the logger, the wipe and the display's hooks, as the run was given them. */
  run: Pick<ReconcileDeps, 'state' | 'logger' | 'now' | 'wipe' | 'onSecret' | 'stage'>;
  providerId: string;
  /** This run's ID: its wipe claims name it. */
  runId: string;
  /** Whole-provider mode: refusals and the deregistration are applied. */
  whole: boolean;
  /** --wait: items blocked in a pass are tried again, and a wait for Omni lasts until --timeout. */
  wait: boolean;
  /** Without --wait: how long one wait for Omni lasts. */
  omniWaitMs: number;
  /** `--concurrency`: the plan items under way follow from it (limiter.ts). */
  concurrency: number;
  deadline: Deadline;
  reads: ProviderCache;
  outcomes: Outcomes;
  items: ItemRunner;
  halt: Halt;
  stubMode: StubMode;
  planOptions: PlanOptions;
}

/**
 * What one pass applied: the parents it released (for Omni to destroy), and a deregistration it left to the next pass.
 */
export interface Applied {
  parents: Pointer[];
  deferred: boolean;
}

export class PassApplier {
  /** Whether a deregistration of this run succeeded. */
  deregistered = false;
  private readonly wipeLimiter: Limiter;
  /** Plan items under way at once. */
  private readonly itemLimiter: Limiter;
  /** The refusals this run wrote: never written again (refusals.ts). */
  private readonly refusedKeys = new Set<string>();

  constructor(private readonly d: ApplierDeps) {
    this.wipeLimiter = new Limiter(d.run.wipe?.options.concurrency ?? 1);
    this.itemLimiter = Limiter.forItems(d.concurrency);
  }

  /**
   * Runs every item and refusal of the plan (made from `snapshot`), then its deregistration (unless this pass
   * announced); no write after `notAfter`, no item started after --timeout.
   */
  async apply(
    plan: Plan,
    snapshot: Snapshot,
    pass: number,
    announced: boolean,
    notAfter: number | undefined,
  ): Promise<Applied> {
    const d = this.d;
    const parents: Pointer[] = [];
    const items = plan.items.filter((it) => d.wait || pass === 1 || !d.items.blockedKeys.has(keyOf(it)));
    d.run.stage?.('releasing', { pass, items: items.length });
    d.outcomes.track(items, plan.running.length);
    const executor = this.executor(snapshot, notAfter);
    await Promise.all([
      this.itemLimiter.each(
        items,
        async (item) => {
          // Not started: the plan made after --timeout reports it as left (deadline.ts).
          if (d.halt.fatal || (d.wait && d.deadline.passed())) return;
          const end = await d.items.run(executor, item);
          if (end?.status === 'released') this.itemLimiter.grow();
          if (end?.releasedParent) parents.push(end.releasedParent);
        },
        (item) => d.items.rankOf(item),
      ),
      ...(d.whole ? this.refusals(plan, notAfter) : []),
    ]);
    if (d.halt.fatal) throw d.halt.fatal;
    d.halt.throwIfInterrupted();
    const dereg = plan.deregistration;
    if (!d.whole || dereg.status !== 'ready' || !dereg.item || d.stubMode.takenOver)
      return { parents, deferred: false };
    if (announced) return { parents, deferred: true };
    d.run.stage?.('deregistering');
    this.deregistered = await deregister(
      { items: d.items, executor, outcomes: d.outcomes, stubMode: d.stubMode },
      dereg.item,
    );
    return { parents, deferred: false };
  }

  /** The plan's refusals, each written once in the run; a write too large for Omni stops the run. */
  private refusals(plan: Plan, notAfter: number | undefined): Promise<void>[] {
    const d = this.d;
    return plan.refusals.map((r) =>
      refuse(
        {
          state: d.run.state,
          providerId: d.providerId,
          outcomes: d.outcomes,
          log: d.run.logger,
          signal: d.halt.signal,
          reads: d.reads,
          refused: this.refusedKeys,
          ...(notAfter !== undefined ? { notAfter } : {}),
        },
        r,
      ).catch((err: unknown) => {
        if (!isTooLarge(err)) throw err;
        d.halt.stop(err);
      }),
    );
  }

  private executor(snapshot: Snapshot, notAfter: number | undefined): Executor {
    const d = this.d;
    return new Executor(
      {
        state: d.run.state,
        log: d.run.logger,
        providerId: d.providerId,
        wipeLimiter: this.wipeLimiter,
        reads: d.reads,
        ...(d.run.wipe ? { wipe: d.run.wipe } : {}),
        signal: d.halt.signal,
        ...(notAfter !== undefined ? { notAfter } : {}),
        waitMs: () => (d.wait ? Math.max(0, d.deadline.leftMs()) : d.omniWaitMs),
        outside: (fn, forOmni, rank) => this.itemLimiter.outside(() => (forOmni ? d.outcomes.waiting(fn) : fn()), rank),
        ...(d.run.onSecret ? { onSecret: d.run.onSecret } : {}),
        beforeWipe: () => {
          if (d.stubMode.takenOver || d.halt.signal.aborted) throw new NotStartedError();
        },
        claim: {
          runId: d.runId,
          now: d.run.now ?? Date.now,
          holdMs: (d.run.wipe?.options.timeoutMs ?? 0) + WIPE_CLAIM_MARGIN_MS,
        },
      },
      snapshot,
      d.planOptions,
    );
  }
}
