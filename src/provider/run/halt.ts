// What cancels a run: the operator's signal (SIGINT, SIGTERM), or the run's own halt when a write no
// run can get past was refused (larger than Omni's write burst: exit 6). Apart from the passes
// (reconcile.ts): the items (item-run.ts) and the refusals stop the run through it, and every call
// and wait of the run is cancelled by its one signal.

export class Halt {
  private readonly controller = new AbortController();
  /** What every call and wait of the run is cancelled by: the operator's signal, or the run's own halt. */
  readonly signal: AbortSignal;
  /** The first write Omni refused as larger than its burst: the run stops at once and throws it (exit 6). */
  fatal: Error | undefined;

  constructor(private readonly operator: AbortSignal | undefined) {
    this.signal = operator ? AbortSignal.any([operator, this.controller.signal]) : this.controller.signal;
  }

  /** The operator's signal came. */
  get interrupted(): boolean {
    return this.operator?.aborted === true;
  }

  /** Stops the run at once (in-flight calls cancelled, nothing new started): `reconcile` throws `err`. */
  stop(err: Error): void {
    this.fatal ??= err;
    this.controller.abort(err);
  }

  /** Throws the operator's signal's reason once it came. */
  throwIfInterrupted(): void {
    if (this.operator?.aborted) throw this.operator.reason ?? new Error('aborted');
  }
}
