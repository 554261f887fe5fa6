// The scheduler of the sim's controllers (controllers.ts) and what becomes of an error inside one.
// A store event queues a task (`<kind>:<id>`); a drain, on the next macrotask and never inside a
// caller's write, runs each queued task once, bounded per drain. A NotFound (gone meanwhile) ends a
// task and a version conflict retries it a few times, as Omni's level-triggered controllers do
// (docs/omni-lifecycle.md 2.1); anything else is a ControllerError, kept and thrown by `idle()`, so
// that the test that caused it fails instead of the sim silently no longer reconciling.

import type { OmniError } from '../../omni-api/errors.js';
import { GrpcCode } from '../../omni-api/errors.js';

const MAX_TASKS_PER_DRAIN = 5000;
const MAX_RETRIES = 5;
const MAX_FAILURES_KEPT = 100;

/**
 * An error inside one of the sim's controllers that is not part of reconciling (a NotFound of what
 * went meanwhile, a version conflict retried): a bug of the sim, or a state it cannot reconcile.
 * Omni would log it and retry forever; the sim records it so that the test that caused it fails.
 */
export class ControllerError extends Error {
  constructor(
    readonly task: string,
    cause: unknown,
  ) {
    super(
      `the simulated Omni's controller task ${task} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.name = 'ControllerError';
  }
}

const failureListeners = new Set<(f: ControllerError) => void>();

/**
 * Tells `listener` of every controller failure, in this process, of controllers started without an
 * `onError` of their own: nobody else hears of it (the test setup, test/setup.ts, fails the test
 * during which one happened). Returns the unsubscribe function.
 */
export function onControllerFailure(listener: (f: ControllerError) => void): () => void {
  failureListeners.add(listener);
  return () => failureListeners.delete(listener);
}

/** The queue of controller tasks: each queued at most once, run by `run` on a later macrotask. */
export class TaskQueue {
  private readonly queue = new Set<string>();
  private readonly retries = new Map<string, number>();
  private scheduled: ReturnType<typeof setImmediate> | undefined;
  private waiters: Array<() => void> = [];
  private stopped = false;
  /** The unexpected failures so far (the first MAX_FAILURES_KEPT). */
  readonly failures: ControllerError[] = [];

  /** `onError`: told of each failure; without it, the process-wide listeners of onControllerFailure are. */
  constructor(
    private readonly run: (task: string) => void,
    private readonly onError?: (err: ControllerError) => void,
  ) {}

  enqueue(task: string): void {
    if (this.stopped) return;
    this.queue.add(task);
    this.scheduled ??= setImmediate(() => this.drain());
  }

  stop(): void {
    this.stopped = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    this.queue.clear();
    this.flushWaiters();
  }

  /** Resolves once every queued task has run; rejects with the first failure there has been. */
  async idle(): Promise<void> {
    if (!this.stopped && (this.queue.size > 0 || this.scheduled))
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    if (this.failures[0]) throw this.failures[0];
  }

  private fail(task: string, e: unknown): void {
    const f = new ControllerError(task, e);
    if (this.failures.length < MAX_FAILURES_KEPT) this.failures.push(f);
    if (this.onError) this.onError(f);
    else for (const l of failureListeners) l(f);
  }

  private flushWaiters(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private drain(): void {
    this.scheduled = undefined;
    let n = 0;
    while (this.queue.size > 0 && n < MAX_TASKS_PER_DRAIN && !this.stopped) {
      const task = this.queue.values().next().value as string;
      this.queue.delete(task);
      n++;
      try {
        this.run(task);
        this.retries.delete(task);
      } catch (e) {
        const code = (e as OmniError).grpcCode;
        if (code === GrpcCode.NotFound) continue; // gone meanwhile: nothing to do
        const attempts = (this.retries.get(task) ?? 0) + 1;
        // A version conflict means someone wrote in between: reconcile again from the new state.
        if (code === GrpcCode.FailedPrecondition && attempts <= MAX_RETRIES) {
          this.retries.set(task, attempts);
          this.queue.add(task);
        } else {
          this.retries.delete(task);
          this.fail(task, e);
        }
      }
    }
    if (this.queue.size > 0 && !this.stopped) this.scheduled = setImmediate(() => this.drain());
    else this.flushWaiters();
  }
}
