// How far a command got: the stage it is in, for the result of every exit (docs/design.md "Output")
// and for what a person or a log sees while it works. A run goes reading -> planning -> (confirming,
// announcing) -> releasing, then waiting and round again while there is more, deregistering when
// nothing of the ID is left, settling after its last write, done; `plan` stops after planning. The
// tracker is the one record of the stage: the command's code enters stages (an OnStage callback in
// the reconcile and snapshot options), displays subscribe to it, and the result takes `current`.

/** The stages of `run` and `plan`. */
export const STAGES = [
  /** Loading, parsing the command line, opening --report and --audit-log. */
  'starting',
  /** Key and ID checks, registration, a live provider's heartbeat, Omni's version. */
  'preflight',
  /** Reading Omni's collections (per kind: `kind` and `count` once its List is in). */
  'reading',
  /** Building the plan from what was read. */
  'planning',
  /** Showing the plan and asking (a terminal without --yes). */
  'confirming',
  /** Writing the heartbeat and the ProviderStatus (whole-provider mode). */
  'announcing',
  /** Running the plan's items and refusals (`items`: how many, `pass`). */
  'releasing',
  /** Waiting for Omni to destroy what was released (`resources`). */
  'waiting',
  /** Watching what others still held after the last write (`items`, `ms`). */
  'settling',
  /** Cleaning up the provider's statuses and deregistering it. */
  'deregistering',
  /** The command's work finished on its own (not interrupted, not declined). */
  'done',
] as const;

export type Stage = (typeof STAGES)[number];

/** What a stage is at, each field only where it says something (see STAGES). */
export interface StageDetail {
  /** reading: the resource type whose List just came in. */
  kind?: string;
  /** reading: how many resources of `kind` were read. */
  count?: number;
  /** releasing: the pass (1, 2, ...). */
  pass?: number;
  /** releasing, settling: how many items. */
  items?: number;
  /** waiting: how many resources wait for Omni. */
  resources?: number;
  /** waiting, settling: for how long at most. */
  ms?: number;
}

/** Enters a stage, or (the same stage again) says how far it got within it. */
export type OnStage = (stage: Stage, detail?: StageDetail) => void;

export interface StageEvent {
  stage: Stage;
  detail: StageDetail;
  /** The stage changed (false: a detail within the same stage). */
  entered: boolean;
  /** When the stage was entered (the tracker's monotonic clock, ms). */
  sinceMs: number;
}

/** The one record of a command's stage. Listeners must not throw: a display never stops a run. */
export class StageTracker {
  #stage: Stage = 'starting';
  #detail: StageDetail = {};
  #since: number;
  readonly #listeners = new Set<(e: StageEvent) => void>();

  constructor(private readonly now: () => number = () => performance.now()) {
    this.#since = now();
  }

  get current(): Stage {
    return this.#stage;
  }

  get detail(): StageDetail {
    return this.#detail;
  }

  /** When the current stage was entered (the tracker's clock, ms). */
  get sinceMs(): number {
    return this.#since;
  }

  /** The OnStage of the options (bound: pass `tracker.enter` as it is). */
  readonly enter: OnStage = (stage, detail = {}) => {
    const entered = stage !== this.#stage;
    if (entered) {
      this.#stage = stage;
      this.#since = this.now();
    }
    this.#detail = detail;
    const e: StageEvent = { stage, detail, entered, sinceMs: this.#since };
    for (const fn of this.#listeners) {
      try {
        fn(e);
      } catch {
        // A display's error is its own; the run goes on (see the class comment).
      }
    }
  };

  /** Calls `fn` on every stage entered and every detail; returns the unsubscribe. */
  subscribe(fn: (e: StageEvent) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }
}
