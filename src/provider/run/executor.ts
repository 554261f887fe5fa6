// Performs a planned item's operations (operations.ts), exactly those and in their order, one call
// each (the client bounds the calls in flight). When an answer is not the one the plan rests on (a version
// conflict, finalizers or an owner changed, something destroyed meanwhile), it reads that one
// resource again and asks the same planner for the item's operations (`replanItem`), so a re-plan
// can never do more than a plan. A NotFound is done only for a resource read by exactly that ID
// (design rule 4): the plan's Get, a Get or a write of this run that succeeded, a watch event.

import type { Logger } from 'pino';
import { ExitCode, StubError } from '../../exit-codes.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { NS_INFRA_PROVIDER, T, describePointer } from '../../omni-api/resource.js';
import type { CallOptions, State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { hasCode } from '../../omni-client/errors.js';
import { BMCConfigSpec, BMCConfigurationSpec } from '../../omni-api/specs/messages.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import type { MessageSchema } from '../../omni-api/specs/schema.js';
import { machineFactsFromBmc, runWipes, wipeBlocksRelease } from '../../wipe/index.js';
import { claimWipe } from './wipe-claim.js';
import type { ClaimDeps } from './wipe-claim.js';
import type { WipeOptions, WipeResult, WipeStrategy } from '../../wipe/index.js';
import { describeDuration, describeHolds, nextStepsOf, predictHolds, stillHolding } from '../plan/explain.js';
import type { Hold, HoldFacts } from '../plan/explain.js';
import type { Limiter } from './limiter.js';
import type { DestroyOp, Operation, RemoveFinalizersOp, TeardownOp, WaitOp, WipeOp } from '../plan/operations.js';
import { isOurFinalizer } from '../ownership.js';
import type { PlanItem, PlanOptions } from '../plan/plan.js';
import { releasesCompletely } from '../plan/facts.js';
import { replanItem } from '../plan/planner.js';
import type { ItemSource, Reads } from '../read/reads.js';
import { itemSnapshot } from '../read/reads.js';
import { safeVersion } from '../read/kind-cache.js';
import type { Snapshot } from '../plan/plan.js';

/** Re-plans of one item before it fails: each follows an answer that showed the resource changed. */
const MAX_REPLANS = 4;

export interface ExecutorDeps {
  state: State;
  log: Logger;
  providerId: string;
  /** Wipes at once at most (the wipe's own concurrency). */
  wipeLimiter: Limiter;
  wipe?: { strategy: WipeStrategy; options: WipeOptions };
  reads: Reads & ItemSource;
  signal?: AbortSignal;
  /** How long a wait for Omni may last now. */
  waitMs: () => number;
  /**
   * Runs `fn` while the item waits for Omni or a wipe: it holds no place meanwhile (taken again in `rank`'s turn), and
   * progress counts it.
   */
  outside: <T>(fn: () => Promise<T>, waitingForOmni: boolean, rank?: number) => Promise<T>;
  /** The item's rank (CallOptions.rank): when it first started in the run; its calls go in that turn. */
  rank?: number;
  /** No write of the item starts at or after this time (Date.now's clock; CallOptions.notAfter): --timeout. */
  notAfter?: number;
  /** Told each BMC password a wipe is given, before the wipe runs (the CLI's redaction: src/redact.ts). */
  onSecret?: (secret: string) => void;
  /** Right before a wipe starts: throws NotStartedError when the run may start nothing more. */
  beforeWipe?: () => void;
  /** This run's wipe claims (wipe-claim.ts): a wipe at most once among overlapping runs. */
  claim?: Pick<ClaimDeps, 'runId' | 'now' | 'holdMs'>;
}

/** The item was not started: the run was interrupted, or another run took over, before its first step. */
export class NotStartedError extends Error {
  constructor() {
    super('not started');
    this.name = 'NotStartedError';
  }
}

/** How an item ended. */
export interface ItemEnd {
  status: 'released' | 'blocked';
  reason?: string;
  nextStep?: string;
  /** Whether a blocked end means the stub's own work is unfinished (exit 5). */
  counts: boolean;
  wipe?: WipeResult;
  /** Released while these finalizers of others stayed on it, with what decides them. */
  heldAtRelease?: { target: Pointer; facts: HoldFacts };
  /** Released, and nothing but Omni's self-releasing finalizers stays on it: Omni destroys it now. */
  releasedParent?: Pointer;
}

type OpResult = { next: true } | { replan: Pointer } | { end: ItemEnd };
const NEXT: OpResult = { next: true };

export class Executor {
  constructor(
    private readonly d: ExecutorDeps,
    private readonly pass: Snapshot,
    private readonly planOptions: PlanOptions,
  ) {}

  /** The same, for the calls of an item of this rank. */
  ranked(rank: number): Executor {
    return new Executor({ ...this.d, rank }, this.pass, this.planOptions);
  }

  /**
   * The options of the item's calls: the run's signal, the item's rank (its turn in the client's call limit and
   * write window), the run's time for writes.
   */
  private opts(): CallOptions {
    return {
      ...(this.d.signal ? { signal: this.d.signal } : {}),
      ...(this.d.rank !== undefined ? { rank: this.d.rank } : {}),
      ...(this.d.notAfter !== undefined ? { notAfter: this.d.notAfter } : {}),
    };
  }

  /** Runs the item's operations; throws when a call fails in a way no re-plan can help (the item failed). */
  async run(item: PlanItem): Promise<ItemEnd> {
    let ops = item.ops;
    let replans = 0;
    let wiped = false;
    const run: RunState = { ready: new Set(), wipe: undefined };
    for (let i = 0; i < ops.length;) {
      const op = ops[i]!;
      if (op.op === 'wipe') wiped = true;
      const r = await this.perform(op, run);
      if ('next' in r) {
        i++;
        continue;
      }
      if ('end' in r) return { ...r.end, ...(run.wipe ? { wipe: run.wipe } : {}) };
      // The answer was not the one planned for: the same planner, on what is known now.
      if (++replans > MAX_REPLANS)
        throw new StubError(
          'STUB_CHANGING',
          ExitCode.Incomplete,
          `${describePointer(r.replan)} kept changing while being released (${MAX_REPLANS} times)`,
        );
      await this.knowMain(item);
      const again = replanItem(
        itemSnapshot(this.pass, this.d.reads, item, r.replan),
        { ...this.planOptions, wipe: this.planOptions.wipe && !wiped },
        item,
        targetOfItem(item),
      );
      this.d.log.debug(
        { kind: item.kind, id: item.id, resource: describePointer(r.replan), ops: again.item?.ops.length ?? 0 },
        'planned again after an answer that showed a change',
      );
      if (!again.item) return { ...this.ended(again.note, again.lettingGo), ...(run.wipe ? { wipe: run.wipe } : {}) };
      ops = again.item.ops;
      i = 0;
    }
    const last = ops.at(-1);
    // Only what Omni destroys at once (no finalizer of anyone else left, or only Omni's that let go by
    // themselves) is worth waiting for before the next pass.
    const parent =
      last && last.op === 'remove-finalizers' && releasesCompletely({ ...item, ops })
        ? { releasedParent: last.target }
        : {};
    return {
      status: 'released',
      counts: true,
      ...this.heldAt(last),
      ...(run.wipe ? { wipe: run.wipe } : {}),
      ...parent,
    };
  }

  /**
   * The item's machine, request or resource, as the planner will need it: read by its ID first when
   * nothing this run holds says what it is now (it left its cache without a DESTROYED event).
   */
  private async knowMain(item: PlanItem): Promise<void> {
    const p = mainOf(item);
    if (!p || this.d.reads.current(p) || this.d.reads.isGone(p)) return;
    const fresh = await getIfExists(this.d.state, p, this.opts());
    if (fresh) this.d.reads.observe(fresh);
    else
      this.notFound(
        {
          target: p,
          foundById: item.ops.some(
            (o) => o.op !== 'wipe' && o.op !== 'get' && 'foundById' in o && o.foundById && sameTarget(o.target, p),
          ),
        },
        'Get',
      );
  }

  /** Nothing of the item left to do after a re-plan: why, from the planner's note. */
  private ended(
    note: { reason: string; nextStep: string; heldByOthers?: { target: Pointer; facts: HoldFacts } } | undefined,
    lettingGo: unknown,
  ): ItemEnd {
    if (!note) return { status: 'released', counts: true };
    if (note.heldByOthers) {
      // Nothing of ours left on it (someone removed it meanwhile): released, held by others.
      const holds = predictHolds(note.heldByOthers.facts);
      return {
        status: 'released',
        counts: true,
        reason: describeHolds(holds),
        nextStep: nextStepsOf(holds),
        heldAtRelease: note.heldByOthers,
        ...(lettingGo ? { releasedParent: note.heldByOthers.target } : {}),
      };
    }
    return {
      status: 'blocked',
      reason: `changed while being released: ${note.reason}; left alone`,
      nextStep: note.nextStep,
      counts: false,
    };
  }

  private heldAt(last: Operation | undefined): Partial<ItemEnd> {
    if (last?.op !== 'remove-finalizers' || !last.holds) return {};
    const holds = predictHolds(last.holds);
    return {
      reason: describeHolds(holds),
      nextStep: nextStepsOf(holds),
      heldAtRelease: { target: last.target, facts: last.holds },
    };
  }

  private perform(op: Operation, run: RunState): Promise<OpResult> {
    switch (op.op) {
      case 'wipe':
        return this.wipe(op, run);
      case 'remove-finalizers':
        return this.removeFinalizers(op);
      case 'teardown':
        return this.teardown(op, run);
      case 'wait':
        return this.wait(op, run);
      case 'destroy':
        return this.destroy(op);
      // Made by the snapshot of this pass: the plan rests on its answer.
      case 'get':
        return Promise.resolve(NEXT);
      case 'check-live-provider':
      case 'create':
        throw new Error(`${op.op} is not an item operation`);
    }
  }

  /** Rule 4: a NotFound is done (the resource is gone) only for what was read by exactly that ID. */
  private notFound(op: { target: Pointer; foundById: boolean }, call: string): OpResult {
    if (!op.foundById && !this.d.reads.namedById(op.target)) throw new NotFoundUnconfirmedError(op.target, call);
    this.d.reads.gone(op.target);
    return { replan: op.target };
  }

  /** Reads the one resource again by its ID, then the item is planned again from it. */
  private async reread(op: { target: Pointer; foundById: boolean }): Promise<OpResult> {
    const fresh = await getIfExists(this.d.state, op.target, this.opts());
    if (!fresh) return this.notFound(op, 'Get');
    this.d.reads.observe(fresh);
    return { replan: op.target };
  }

  private async wipe(op: WipeOp, run: RunState): Promise<OpResult> {
    const w = this.d.wipe;
    if (!w) return NEXT;
    const facts = machineFactsFromBmc(
      op.machineId,
      this.d.providerId,
      decodeOrUndefined(BMCConfigurationSpec, op.bmcConfiguration),
      decodeOrUndefined(BMCConfigSpec, op.bmcConfig),
    );
    if (facts.bmc?.password) this.d.onSecret?.(facts.bmc.password);
    // Once it has a wipe slot: whether the run may still start one, then the claim (a claim made
    // while queued could run out before its wipe starts), then the wipe.
    const done = await this.d.outside(
      () =>
        this.d.wipeLimiter.run(async () => {
          this.d.beforeWipe?.();
          const taken = op.claim && w.strategy.name !== 'none' ? await this.claim(op.claim, op.machineId) : undefined;
          if (taken) return { taken };
          const [res] = await runWipes(w.strategy, [facts], {
            concurrency: 1,
            timeoutMs: w.options.timeoutMs,
            logger: this.d.log,
            ...(this.d.signal ? { signal: this.d.signal } : {}),
          });
          return { res };
        }),
      false,
      this.d.rank,
    );
    if ('taken' in done)
      return {
        end: {
          status: 'blocked',
          reason: `${done.taken}; not wiped by this run`,
          nextStep: 'run again once that run has ended: it finishes where that run stopped',
          counts: true,
        },
      };
    const res = done.res;
    if (!res) return NEXT;
    run.wipe = res;
    if (wipeBlocksRelease(res, w.options)) {
      return {
        end: {
          status: 'blocked',
          reason:
            `wipe ${res.outcome}${res.reason ? `: ${res.reason}` : ''} (--require-wipe keeps the machine's ` +
            `finalizers)`,
          nextStep: 'fix the BMC access or the wipe command and run again, or run without --require-wipe',
          counts: true,
        },
      };
    }
    return NEXT;
  }

  /** Claims the machine's wipe for this run (wipe-claim.ts); why not, when another run holds it. */
  private async claim(target: Pointer, machineId: string): Promise<string | undefined> {
    if (!this.d.claim) return undefined;
    const claimed = await claimWipe(
      {
        ...this.d.claim,
        state: this.d.state,
        options: this.opts(),
        observe: (r) => this.d.reads.observe(r),
      },
      target,
      machineId,
    );
    return claimed.kind === 'taken' ? claimed.reason : undefined;
  }

  /** One Update, from the resource at the planned version, in the planned phase only. */
  private async removeFinalizers(op: RemoveFinalizersOp): Promise<OpResult> {
    const cur = this.d.reads.current(op.target);
    if (!cur) return this.d.reads.isGone(op.target) ? { replan: op.target } : this.reread(op);
    // Changed since it was planned: plan it again from what it is now.
    if (cur.metadata.version !== op.version) return { replan: op.target };
    const res = await this.d.state.removeFinalizers(cur, [...op.finalizers], {
      ...this.opts(),
      requirePhase: op.phase,
    });
    if (res.outcome !== 'removed')
      this.d.log.debug(
        { resource: describePointer(op.target), finalizers: op.finalizers, outcome: res.outcome },
        'remove finalizers: nothing written',
      );
    switch (res.outcome) {
      case 'removed':
        this.d.reads.observe(res.after!);
        // A conflict on the way: the client read it again and removed the same finalizers, in the
        // same phase only; what else changed decides the rest of the item.
        return res.before?.metadata.version === op.version ? NEXT : { replan: op.target };
      case 'not-found':
        return this.notFound(op, 'Update');
      case 'gone':
        this.d.reads.gone(op.target);
        return { replan: op.target };
      case 'absent':
      case 'phase-changed':
        if (res.before) this.d.reads.observe(res.before);
        return { replan: op.target };
    }
  }

  private async teardown(op: TeardownOp, run: RunState): Promise<OpResult> {
    let ready: boolean;
    try {
      ready = await this.d.state.teardown(op.target, this.opts());
    } catch (err) {
      // Thrown only when its Get found nothing (the client's gateway-state.ts).
      if (hasCode(err, 'OMNI_NOT_FOUND')) return this.notFound(op, 'Get');
      throw err;
    }
    // Its Get found it: read by its ID.
    this.d.reads.readById(op.target);
    if (ready) run.ready.add(describePointer(op.target));
    return NEXT;
  }

  private async wait(op: WaitOp, run: RunState): Promise<OpResult> {
    // The teardown's answer already showed nothing holding it.
    if (run.ready.has(describePointer(op.target))) return NEXT;
    // What the cache holds may already be Omni letting go (its event came before this step): tearing
    // down with no finalizer left is released at that version. Anything else is a version from before
    // Omni let go, so only a later one can show it.
    const cur = this.d.reads.current(op.target);
    const letGo = cur !== undefined && cur.metadata.phase === 'tearingDown' && cur.metadata.finalizers.length === 0;
    const minVersion =
      cur === undefined ? '0' : letGo ? cur.metadata.version : String(safeVersion(cur.metadata.version) + 1n);
    const ms = this.d.waitMs();
    const w = await this.d.outside(
      () => this.d.reads.wait(op.target, 'no-finalizers', ms, minVersion),
      true,
      this.d.rank,
    );
    if (w === 'released') return NEXT;
    // A DESTROYED event (the watch named it), or a Get of its ID answering NotFound.
    if (w === 'gone') return this.notFound(op, 'a Get while waiting for Omni');
    if (w === 'aborted') throw this.d.signal?.reason ?? new Error('aborted');
    const holds = holdsNow(this.d.reads, this.d.providerId, op.target, op.holds);
    return {
      end: {
        status: 'blocked',
        reason: `${describePointer(op.target)} still held after ${describeDuration(ms)} by ${describeHolds(holds)}`,
        nextStep: nextStepsOf(holds),
        counts: true,
      },
    };
  }

  private async destroy(op: DestroyOp): Promise<OpResult> {
    try {
      const before = this.d.reads.current(op.target);
      await this.d.state.destroy(op.target, { owner: op.owner, ...this.opts(), ...(before ? { before } : {}) });
      this.d.reads.gone(op.target);
      return NEXT;
    } catch (err) {
      if (hasCode(err, 'OMNI_NOT_FOUND')) {
        const r = this.notFound(op, 'Destroy');
        return 'replan' in r ? NEXT : r;
      }
      // Finalizers added or the owner changed since it was read: read it again, plan again.
      if (!hasCode(err, 'OMNI_FAILED_PRECONDITION') && !hasCode(err, 'OMNI_PERMISSION_DENIED')) throw err;
      return this.reread(op);
    }
  }
}

interface RunState {
  /** Targets whose teardown answered that nothing holds them any more. */
  ready: Set<string>;
  wipe: WipeResult | undefined;
}

/**
 * After a wait: the holds of what a watch of this run saw on the resource last (or, unseen, of
 * `facts`), ours left out; what was to let go by itself and did not is said so.
 */
export function holdsNow(reads: Reads, providerId: string, p: Pointer, facts: HoldFacts): Hold[] {
  const now = reads.finalizersOf(p);
  const remaining = Array.isArray(now) ? now.filter((f) => !isOurFinalizer(f, providerId)) : facts.remaining;
  return stillHolding(predictHolds({ ...facts, remaining }));
}

/** What an item is about: its machine, request or BMCConfig, or the one resource of a leftover. */
function mainOf(item: PlanItem): Pointer | undefined {
  switch (item.kind) {
    case 'InfraMachine':
      return { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: item.id };
    case 'MachineRequest':
      return { namespace: NS_INFRA_PROVIDER, type: T.MachineRequest, id: item.id };
    case 'BMCConfig':
      return { namespace: NS_INFRA_PROVIDER, type: T.BMCConfig, id: item.id };
    case 'leftover':
      return targetOfItem(item);
    case 'deregistration':
      return undefined;
  }
}

function sameTarget(a: Pointer, b: Pointer): boolean {
  return a.namespace === b.namespace && a.type === b.type && a.id === b.id;
}

/** The one resource a leftover (or a clean-up) item is about. */
function targetOfItem(item: PlanItem): Pointer | undefined {
  const first = item.ops.find((o): o is Exclude<Operation, WipeOp> => o.op !== 'wipe' && o.op !== 'get');
  return first?.target;
}

function decodeOrUndefined<V>(schema: MessageSchema<V>, r: Resource | undefined): V | undefined {
  if (!r) return undefined;
  try {
    return decodeSpec(schema, r.spec.protoSpec).value;
  } catch {
    return undefined;
  }
}

/**
 * A write or read answered NotFound for a resource nothing had read by exactly that ID (it came from
 * a List only): not taken for done (design rule 4). The item fails; the run exits 5.
 */
export class NotFoundUnconfirmedError extends StubError {
  readonly nextStep: string;
  constructor(p: Pointer, call: string) {
    super(
      'STUB_NOT_FOUND_UNCONFIRMED',
      ExitCode.Incomplete,
      `${describePointer(p)}: ${call} answered NotFound, but nothing read this resource by its ID before (it came ` +
        `from a List only), so it is not taken for done`,
    );
    this.name = 'NotFoundUnconfirmedError';
    this.nextStep =
      'run again (the next run lists it afresh); if it keeps failing, check what answers in front of Omni (a proxy ' +
      'or gateway rewriting answers)';
  }
}
