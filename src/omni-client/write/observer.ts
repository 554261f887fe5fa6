// A hook on every write a State sends to Omni (Create, Update, Destroy; the Updates of teardown and
// removeFinalizers included), for the audit log: it hears of the write before it is sent and of its
// outcome after. "Failed" is kept for an answer in which Omni refused the write. A back-pressure
// answer or a lost one is settled by the read-back that follows it (pressure.ts): applied ("ok"),
// "refused" or "not-applied"; anything else that ends a write that was (or may have been) sent is
// "unknown": it may have been applied.

import { CanceledError, GrpcCode, OmniError } from '../../omni-api/errors.js';
import type { Phase, Pointer, Resource } from '../../omni-api/resource.js';

export interface WriteIntent {
  method: 'Create' | 'Update' | 'Destroy';
  resource: Pointer;
  /** The owner the write is made as. */
  owner: string;
  /** Create and Update: the resource as sent (an Update carries the version it was read at). */
  sent?: Resource;
  /** The resource as the caller last read it, when the caller said (options `before`). */
  before?: Resource;
  /** Update: the phase Omni must find (teardown sends `running`). */
  expectedPhase?: Phase;
}

export type WriteOutcome =
  /**
   * Applied: Omni's answer said so, or (`evidence: 'read-back'`) a Get by its ID after a back-pressure answer or a lost
   * one (`error`) found what it set (pressure.ts).
   */
  | { result: 'ok'; after?: Resource; evidence?: 'read-back'; error?: unknown }
  /** Omni answered that it did not apply the write. */
  | { result: 'failed'; error: OmniError }
  /**
   * Omni answered with back-pressure (its write budget's DeadlineExceeded, Unavailable, a proxy's 429 or 503), and a
   * Get by its ID then showed the write had not taken effect: refused, not applied; pressure.ts may send it again, as
   * a new write.
   */
  | { result: 'refused'; error: unknown }
  /** No answer came (the exchange broke), and a Get by its ID then showed the write had not taken effect. */
  | { result: 'not-applied'; error: unknown }
  /**
   * No answer that says (cancelled, timed out, connection broken, unreadable answer, a refusal after a retry), and no
   * read-back that settled it: it may have been applied.
   */
  | { result: 'unknown'; error: unknown };

/**
 * The caller's offer to settle the outcome of a failed send itself, after reading the resource back (pressure.ts):
 * called with the error; returning true takes `settle` (to be called once), false leaves the outcome to outcomeOf.
 */
export type DeferOutcome = (err: unknown, settle: (outcome: WriteOutcome) => void) => boolean;

/** Call options of a write that the back-pressure layer passes to the State below it (GatewayState). */
export interface DeferringOptions {
  deferOutcome?: DeferOutcome;
}

/**
 * Called synchronously before a write is sent (a throw stops the write); the function it returns gets the outcome,
 * once.
 */
export type WriteObserver = (intent: WriteIntent) => (outcome: WriteOutcome) => void;

/**
 * gRPC codes with which Omni refuses a write before changing anything (validation, access, version
 * and phase conflicts, pending finalizers). Canceled, DeadlineExceeded, Unavailable, Aborted,
 * Unknown, Internal and DataLoss may come after the write was applied (or from a proxy in between).
 */
const REFUSALS = new Set<number>([
  GrpcCode.InvalidArgument,
  GrpcCode.NotFound,
  GrpcCode.AlreadyExists,
  GrpcCode.PermissionDenied,
  GrpcCode.ResourceExhausted,
  GrpcCode.FailedPrecondition,
  GrpcCode.OutOfRange,
  GrpcCode.Unimplemented,
  GrpcCode.Unauthenticated,
]);

/**
 * The outcome of a write that threw. `retried`: the transport sent it more than once; a refusal of
 * the last attempt then proves nothing about an earlier one whose answer was lost (a version
 * conflict is what an applied first attempt makes of its retry).
 */
export function outcomeOf(err: unknown, retried: boolean): WriteOutcome {
  if (!retried && err instanceof OmniError && REFUSALS.has(err.grpcCode)) return { result: 'failed', error: err };
  return { result: 'unknown', error: err };
}

/**
 * Runs `send` between the observer's two calls. `send` gets the callback the transport calls on a
 * retry; `after` turns what it resolved to into the resource Omni answered (none for Destroy). A
 * write whose caller has already given up is not sent, so the observer does not hear of it: after a
 * SIGTERM the writes still queued would otherwise each log an intent that never left.
 */
export async function observeWrite<T>(
  observer: WriteObserver | undefined,
  intent: WriteIntent,
  send: (onRetry: () => void) => Promise<T>,
  after: (v: T) => Resource | undefined,
  signal?: AbortSignal,
  defer?: DeferOutcome,
): Promise<T> {
  if (!observer) return send(() => undefined);
  if (signal?.aborted)
    throw new CanceledError('cancelled by the caller', { cause: signal.reason, resource: intent.resource });
  const done = observer(intent);
  let retried = false;
  let v: T;
  try {
    v = await send(() => {
      retried = true;
    });
  } catch (err) {
    if (!defer?.(err, done)) done(outcomeOf(err, retried));
    throw err;
  }
  done({ result: 'ok', after: after(v) });
  return v;
}
