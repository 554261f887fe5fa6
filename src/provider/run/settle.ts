// After the last write: watch, for at most `--settle` and as queries on the run's caches
// (cache.ts), each item that finalizers of others still held when it was released (Omni's controllers
// let go within the same second when nothing holds them: docs/omni-behaviour.md 'What Omni's own
// controllers wait for'), and the deletions of the last
// plan that only Omni's finalizers hold and that it should let go by itself. Gone: plainly released
// (or nothing to report). Still there: held by what the watch saw on it last. Nothing here writes
// or decides anything; it is what the report says. For it, a resource missing from its kind's cache
// is gone (what design rule 10 asks of destructive steps is not needed for a sentence of the
// report).

import type { Logger } from 'pino';
import { describePointer } from '../../omni-api/resource.js';
import { describeHolds, nextStepsOf, predictHolds } from '../plan/explain.js';
import type { ItemOutcome, Outcomes } from './outcomes.js';
import type { Plan } from '../plan/plan.js';
import type { Reads } from '../read/reads.js';
import { holdsNow } from './item-end.js';
import type { ItemRunner } from './item-run.js';

/** What the settle after the last write watched, and what it found. */
export interface SettleSummary {
  ms: number;
  /** What there was to watch: released while others held it, or left to Omni to let go (counted with ms 0 too). */
  items: number;
  gone: number;
  held: number;
}

/** What the settle works with. */
export interface Settling {
  /** The run's caches: what is waited for, and what a watch saw on a resource last. */
  reads: Reads;
  outcomes: Outcomes;
  /** What the run released while finalizers of others stayed on it. */
  items: Pick<ItemRunner, 'heldAtRelease'>;
  providerId: string;
  log: Logger;
  signal?: AbortSignal;
}

export async function settle(d: Settling, summary: SettleSummary, plan: Plan): Promise<void> {
  const outcomes = d.outcomes.items;
  const held = [...d.items.heldAtRelease].flatMap(([key, h]) => {
    const o = outcomes.get(key);
    return o?.status === 'released' && o.heldBy ? [{ o, ...h }] : [];
  });
  // Deletions that nothing of ours held, left to Omni (plan.lettingGo): blocked only if still held.
  const reported = new Set([...outcomes.values()].map((o) => `${o.kind}/${o.id}`));
  for (const n of plan.lettingGo) {
    const key = `${n.kind}/${n.id}`;
    if (!n.heldByOthers || reported.has(key)) continue;
    const holds = predictHolds(n.heldByOthers.facts);
    const o: ItemOutcome = {
      kind: n.kind as ItemOutcome['kind'],
      id: n.id,
      status: 'blocked',
      reason: describeHolds(holds),
      nextStep: nextStepsOf(holds),
      heldBy: [...n.heldByOthers.facts.remaining],
      counts: false,
    };
    outcomes.set(key, o);
    held.push({ o, ...n.heldByOthers });
  }
  const ms = summary.ms;
  summary.items = held.length;
  if (held.length === 0) return;
  if (ms <= 0) {
    for (const { o } of held) o.settle = { ms: 0, outcome: 'not-watched' };
    return;
  }
  d.log.debug({ items: held.length, ms }, 'settle: watching what others still held when released');
  const ends = await Promise.all(
    held.map(({ target }) => d.reads.wait(target, 'gone', ms).catch((err: unknown) => err as Error)),
  );
  held.forEach(({ o, target, facts }, i) => {
    const end = ends[i]!;
    if (end === 'aborted') return;
    if (end instanceof Error) {
      o.settle = { ms, outcome: 'watch-failed', error: end.message };
      return;
    }
    if (end === 'gone' || d.reads.finalizersOf(target) === 'gone') {
      summary.gone++;
      // Left to Omni and gone: nothing to report. Released and gone: plainly released.
      if (o.status === 'blocked') outcomes.delete(`${o.kind}/${o.id}`);
      o.settle = { ms, outcome: 'gone' };
      delete o.heldBy;
      delete o.reason;
      delete o.nextStep;
      return;
    }
    const holds = holdsNow(d.reads, d.providerId, target, facts);
    o.settle = { ms, outcome: 'held' };
    o.heldBy = holds.map((h) => h.finalizer);
    o.reason =
      holds.length > 0
        ? describeHolds(holds)
        : `no finalizer left on ${describePointer(target)}, but Omni had not destroyed it`;
    o.nextStep = holds.length > 0 ? nextStepsOf(holds) : "check Omni's logs, and run again";
    summary.held++;
    d.log.warn({ kind: o.kind, id: o.id, heldBy: o.heldBy, afterMs: ms }, 'still held after the settle time');
  });
  if (d.signal?.aborted) throw d.signal.reason ?? new Error('aborted');
}
