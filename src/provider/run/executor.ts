// Performs a planned item's operations (operations.ts), exactly those and in their order, one call
// each (the client bounds the calls in flight). When an answer is not the one the plan rests on (a version
// conflict, finalizers or an owner changed, something destroyed meanwhile), it reads that one
// resource again and asks the same planner for the item's operations (`replanItem`), so a re-plan
// can never do more than a plan. A NotFound is done only for a resource read by exactly that ID
// (design rule 4): the plan's Get, a Get or a write of this run that succeeded, a watch event.
// The wipe operation is wipe-step.ts; what an answer means for the item and how it ends, item-end.ts.

import { ExitCode, StubError } from '../../exit-codes.js';
import type { Pointer } from '../../omni-api/resource.js';
import { NS_INFRA_PROVIDER, T, describePointer } from '../../omni-api/resource.js';
import type { CallOptions, OwnerOptions } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import { hasCode } from '../../omni-client/errors.js';
import type { DestroyOp, Operation, RemoveFinalizersOp, TeardownOp, WaitOp, WipeOp } from '../plan/operations.js';
import type { PlanItem, PlanOptions } from '../plan/plan.js';
import { machineOf, releasesCompletely, requestOf } from '../plan/facts.js';
import { replanItem } from '../plan/planner.js';
import type { ItemSource, Reads } from '../read/reads.js';
import { itemSnapshot } from '../read/reads.js';
import { safeVersion } from '../read/kind-store.js';
import type { Snapshot } from '../plan/plan.js';
import type { WipeResult } from '../../wipe/index.js';
import { endAfterReplan, heldAtEnd, NEXT, NotFoundUnconfirmedError, stillHeldEnd } from './item-end.js';
import type { ItemEnd, OpResult } from './item-end.js';
import { wipeStep } from './wipe-step.js';
import type { WipeStepDeps } from './wipe-step.js';

/** Re-plans of one item before it fails: each follows an answer that showed the resource changed. */
const MAX_REPLANS = 4;

export interface ExecutorDeps extends WipeStepDeps {
  reads: Reads & ItemSource;
  /** How long a wait for Omni may last now. */
  waitMs: () => number;
  /** No write of the item starts at or after this time (Date.now's clock; CallOptions.notAfter): --timeout. */
  notAfter?: number;
}

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
    // One object for all the item's calls (nothing changes it): not three spreads per call.
    this.callOptions ??= {
      ...(this.d.signal ? { signal: this.d.signal } : {}),
      ...(this.d.rank !== undefined ? { rank: this.d.rank } : {}),
      ...(this.d.notAfter !== undefined ? { notAfter: this.d.notAfter } : {}),
    };
    return this.callOptions;
  }
  private callOptions: CallOptions | undefined;

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
      if (!again.item) {
        const parent = item.kind === 'InfraMachine' || item.kind === 'MachineRequest' ? mainOf(item) : undefined;
        return { ...endAfterReplan(again.note, again.lettingGo, parent), ...(run.wipe ? { wipe: run.wipe } : {}) };
      }
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
      ...heldAtEnd(last),
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

  private perform(op: Operation, run: RunState): Promise<OpResult> {
    switch (op.op) {
      case 'wipe':
        return wipeStep(this.d, this.opts(), op, run);
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

  /** One Update, from the resource at the planned version, in the planned phase only. */
  private async removeFinalizers(op: RemoveFinalizersOp): Promise<OpResult> {
    const cur = this.d.reads.current(op.target);
    if (!cur) return this.d.reads.isGone(op.target) ? { replan: op.target } : this.reread(op);
    // Changed since it was planned: plan it again from what it is now.
    if (cur.metadata.version !== op.version) return { replan: op.target };
    const res = await this.d.state.removeFinalizers(cur, op.finalizers, {
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
    return stillHeldEnd(this.d.reads, this.d.providerId, op, ms);
  }

  private async destroy(op: DestroyOp): Promise<OpResult> {
    try {
      const before = this.d.reads.current(op.target);
      // One literal either way: a property added afterwards gives the object a second block.
      const opts: OwnerOptions = before
        ? { owner: op.owner, ...this.opts(), before }
        : { owner: op.owner, ...this.opts() };
      await this.d.state.destroy(op.target, opts);
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

/** What an item is about: its machine, request or BMCConfig, or the one resource of a leftover. */
function mainOf(item: PlanItem): Pointer | undefined {
  switch (item.kind) {
    case 'InfraMachine':
      return machineOf(item.id);
    case 'MachineRequest':
      return requestOf(item.id);
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
