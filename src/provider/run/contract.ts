// What a run (reconcile.ts) is asked (ReconcileOptions: the operator's flags), given
// (ReconcileDeps: the client's State, the clocks, the wipe, the hooks of a display) and answers
// (ReconcileResult: the plans, the outcomes, what it wrote and how it ended; the report is built from
// it, report/run-report.ts). Apart from the passes: the CLI, the report and the tests speak these
// types without the machinery behind them.

import type { Logger } from 'pino';
import type { WipeOptions, WipeStrategy } from '../../wipe/index.js';
import type { Plan } from '../plan/plan.js';
import type { ProfileOption } from '../profile.js';
import type { RunTakenOverError, Timers } from './announce.js';
import type { Remaining } from './deadline.js';
import type { ItemEnded, ItemOutcome, ReconcileProgress, RefusalOutcome } from './outcomes.js';
import type { SettleSummary } from './settle.js';
import type { OnStage } from './stage.js';
import type { State } from '../../omni-api/state.js';

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
   * it, for Omni's own controllers to let go (default DEFAULT_SETTLE_MS, reconcile.ts); 0: not watched.
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
