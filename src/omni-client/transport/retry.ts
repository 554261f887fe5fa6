// What is retried, how often, and how long between attempts. Every failure of an attempt becomes a
// ApiError (failureOf) that says whether sending the call again may succeed (`retriable`): a
// broken connection, Omni's Unavailable, a proxy's 502/503/504 without Omni's status. The loop
// retries those with capped jittered backoff, and once after adopting Omni's clock on a refused
// signature (clock.ts). Nothing else is retried: a refusal or a malformed answer would repeat.
// A write (Create, Update, Destroy) is sent again here only when it never left (the connection was
// never opened) or Omni refused its signature: any other failure leaves its outcome unknown, and
// sending it blindly could apply it twice. pressure.ts reads such a write back and decides.
// A `Retry-After` is honoured (capped at RETRY_AFTER_CAP_MS) when it is longer than the backoff.

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { escapeControl } from '../../omni-api/untrusted.js';
import { onAbort } from './abort.js';
import { errCtx, where, type CallContext } from './call.js';
import { isSignatureRefusal, type SigningClock } from './clock.js';
import type { Scope } from './deadline.js';
import { ApiError, type UnauthenticatedError } from '../../omni-api/errors.js';
import { ProtocolError, TransportError } from '../errors.js';
import { WireError } from '../../omni-api/wire.js';
import { type MethodName } from '../../omni-api/wire.js';

export type DelayFn = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface BackoffOptions {
  baseMs: number;
  capMs: number;
}

/** Exponential backoff, capped, with jitter in [d/2, d): concurrent clients do not retry in step. */
export function jitteredBackoff(attempt: number, b: BackoffOptions, random: () => number = Math.random): number {
  const d = Math.min(b.capMs, b.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + (random() * d) / 2);
}

/**
 * Waits `ms`; rejects with the signal's reason when it aborts. Through abort.ts's one listener per signal: every write
 * in backoff shares the run's signal, and a listener each would make Node warn (MaxListenersExceededWarning).
 */
export const defaultDelay: DelayFn = (ms, signal) => {
  if (!signal) return sleep(ms);
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      resolve();
    }, ms);
    const unsubscribe = onAbort(signal, () => {
      clearTimeout(timer);
      reject(abortReason(signal));
    });
  });
};

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Node's and undici's codes of a connection that broke (or never opened) for reasons that pass. */
const RETRIABLE_CAUSES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'Z_BUF_ERROR',
]);

/** The longest `Retry-After` the client honours, per wait (a proxy may ask for hours). */
export const RETRY_AFTER_CAP_MS = 60_000;

/** The methods that change Omni: their outcome is unknown once sent and unanswered. */
export const WRITE_METHODS: ReadonlySet<MethodName> = new Set<MethodName>(['Create', 'Update', 'Destroy']);

/** Node's and undici's codes of a connection that never opened: the call did not leave. */
const NEVER_SENT_CAUSES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT']);

/** Whether a failure shows that the call never reached the server (the connection never opened). */
export function neverSent(e: ApiError): boolean {
  const cause = (e.cause as NodeJS.ErrnoException | undefined)?.code;
  return (
    e instanceof TransportError &&
    e.httpStatus === undefined &&
    typeof cause === 'string' &&
    NEVER_SENT_CAUSES.has(cause)
  );
}

/**
 * What an attempt's failure is: the abort's error once the call's signal aborted; the client's
 * errors as they are; a WireError (a malformed answer, from reading or decoding it) a ProtocolError
 * naming the call and the endpoint; anything else (undici, Node, zlib) a TransportError, retriable
 * when its code is one of a connection that broke.
 */
export function failureOf(method: MethodName, ctx: CallContext, scope: Scope, origin: string, raw: unknown): ApiError {
  if (scope.signal.aborted) return scope.abortError();
  if (raw instanceof ApiError) return raw;
  if (raw instanceof WireError) {
    return new ProtocolError(
      raw.code,
      `${where(method, ctx)}: bad answer from Omni at ${origin}: ${escapeControl(raw.message)}`,
      errCtx(method, ctx),
    );
  }
  const err = raw as NodeJS.ErrnoException;
  const code = typeof err?.code === 'string' ? err.code : undefined;
  return new TransportError(
    `${where(method, ctx)}: cannot reach Omni at ${origin}: ` +
      `${code ? `${code} ` : ''}${escapeControl(err?.message ?? String(raw))}`,
    {
      ...errCtx(method, ctx),
      cause: raw,
      retriable: code !== undefined && RETRIABLE_CAUSES.has(code),
    },
  );
}

export interface RetryPolicy {
  /** Extra attempts of a retriable failure. */
  retries: number;
  backoff: BackoffOptions;
  delay: DelayFn;
  random: () => number;
  log: Logger;
}

export class Retrier {
  constructor(
    private readonly policy: RetryPolicy,
    private readonly clock: SigningClock,
    private readonly origin: string,
    /** The error for a signature Omni refused with the clock adopted (or not to be adopted). */
    private readonly refused: (method: MethodName, ctx: CallContext, e: UnauthenticatedError) => ApiError,
  ) {}

  async run<T>(method: MethodName, ctx: CallContext, scope: Scope, attempt: () => Promise<T>): Promise<T> {
    let retries = 0;
    let skewRetried = false;
    for (;;) {
      // The offset this attempt signs with: a concurrent call may adopt Omni's clock meanwhile.
      const signedWithOffset = this.clock.offsetMs;
      try {
        if (scope.signal.aborted) throw scope.abortError();
        return await attempt();
      } catch (raw) {
        const e = this.failure(method, ctx, scope, raw);
        if (scope.signal.aborted) throw e;
        if (isSignatureRefusal(e)) {
          if (!skewRetried && (this.clock.offsetMs !== signedWithOffset || this.clock.adopt(method, e.serverDate))) {
            skewRetried = true;
            continue;
          }
          throw this.refused(method, ctx, e);
        }
        if (!e.retriable || retries >= this.policy.retries) throw e;
        // A write whose outcome is unknown is the caller's to read back (pressure.ts), never resent here.
        if (WRITE_METHODS.has(method) && !neverSent(e)) throw e;
        ctx.onRetry?.();
        const ms = Math.max(
          jitteredBackoff(retries++, this.policy.backoff, this.policy.random),
          Math.min(e.retryAfterMs ?? 0, RETRY_AFTER_CAP_MS),
        );
        this.policy.log.debug({ method, attempt: retries, delayMs: ms, err: e.message }, 'retrying an Omni call');
        try {
          await this.policy.delay(ms, scope.signal);
        } catch {
          throw scope.abortError();
        }
      }
    }
  }

  failure(method: MethodName, ctx: CallContext, scope: Scope, raw: unknown): ApiError {
    return failureOf(method, ctx, scope, this.origin, raw);
  }
}
