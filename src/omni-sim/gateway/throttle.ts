// Omni's etcd write throttle as the sim applies it (Omni 1.9.0 and later, off unless configured;
// `internal/backend/ratelimit/` and `storage.rateLimits.etcd` in its source): a token bucket
// (token-bucket.ts) in bytes per second with a burst, one per caller class (user, infraProvider,
// internal), charged by the marshaled size (store/marshaled-size.ts) of what a Create, Update or
// Destroy writes to etcd (a Destroy: of what it deletes). It runs inside the etcd state, after the
// local checks (version, owner, phase, finalizers; a Create's existence check comes after it) and
// before the transaction. A write that can have its bytes within min(the call's deadline, maxWait)
// waits for them and is applied; one that cannot fails at once with DeadlineExceeded
// (golang.org/x/time/rate reserves the tokens, or refuses when the reservation would end after the
// deadline, without waiting); one larger than the burst fails with ResourceExhausted. Only
// etcd-backed kinds are charged (backend.ts). The other back-pressure the sim can apply, a proxy in
// front of Omni answering 429 or 503, is proxy-limit.ts.
//
// How the sim waits: the store is synchronous, so a write that must wait throws ThrottleWait before it
// changes anything; the gateway waits for it (`throttled`) and sends the call again, which finds its
// bytes already reserved. A client that goes away while its write waits gives the tokens back and its
// write is not applied (Omni's context is cancelled). Omni's own controllers (class internal) are
// synchronous here: their writes are charged but never delayed.

import { AsyncLocalStorage } from 'node:async_hooks';
import { errorFromStatus, GrpcCode } from '../../omni-api/errors.js';
import type { Identity } from '../api.js';
import { TokenBucket } from './token-bucket.js';

export type CallerClass = 'user' | 'infraProvider' | 'internal';
export const CALLER_CLASSES: readonly CallerClass[] = ['user', 'infraProvider', 'internal'];
/** How Omni names the classes in its messages and metrics (actor.Type). */
const CLASS_LABEL: Record<CallerClass, string> = { user: 'user', infraProvider: 'infraprovider', internal: 'internal' };

export interface ClassBudget {
  bytesPerSecond: number;
  burst: number;
}

export interface ThrottleConfig {
  user?: ClassBudget;
  infraProvider?: ClassBudget;
  internal?: ClassBudget;
  /** The longest a write waits, whatever its deadline; 0: no cap but the deadline. Omni's default 30 s. */
  maxWaitMs?: number;
}

export const DEFAULT_MAX_WAIT_MS = 30_000;

/** What the sim counted per class. */
export interface ClassStats {
  /** Writes let through, and their bytes. */
  admitted: number;
  admittedBytes: number;
  /** Of those, the writes that waited, and how long in all. */
  waited: number;
  waitedMs: number;
  /** Refused with DeadlineExceeded (their bytes would not be there in time), and their bytes. */
  failedTimeout: number;
  failedTimeoutBytes: number;
  /** Refused with ResourceExhausted (larger than the burst). */
  failedOversize: number;
  /** Their caller went away while they waited (not applied). */
  abandoned: number;
}

export type ThrottleStats = Record<CallerClass, ClassStats>;

const zeroStats = (): ClassStats => ({
  admitted: 0,
  admittedBytes: 0,
  waited: 0,
  waitedMs: 0,
  failedTimeout: 0,
  failedTimeoutBytes: 0,
  failedOversize: 0,
  abandoned: 0,
});

/** One gateway call being served: its deadline (from Grpc-Timeout) and whether its bytes are already reserved. */
export interface ThrottleCall {
  /** Monotonic ms; undefined: the call has none. */
  deadline?: number | undefined;
  /** Bytes reserved by an earlier attempt of this call, taken by its next write. */
  reserved?: { cls: CallerClass; bytes: number; waitedMs: number } | undefined;
  /** How many times the operation was sent again after a wait (0: the first time). */
  resent?: number;
}

/** Thrown by a write that must wait for its bytes, before it changed anything: wait `waitMs`, then send it again. */
export class ThrottleWait extends Error {
  constructor(
    readonly waitMs: number,
    readonly giveBack: () => void,
    readonly reserved: NonNullable<ThrottleCall['reserved']>,
  ) {
    super(`write throttled: ${waitMs.toFixed(0)} ms to wait`);
    this.name = 'ThrottleWait';
  }
}

export function classOf(who: Identity): CallerClass {
  if (who.internal) return 'internal';
  // Omni: an infra provider's service account is class infraprovider; other service accounts and users share `user`.
  return who.role === 'InfraProvider' ? 'infraProvider' : 'user';
}

export class WriteThrottle {
  private readonly calls = new AsyncLocalStorage<ThrottleCall>();
  private readonly buckets: Partial<Record<CallerClass, TokenBucket>> = {};
  private readonly counts: ThrottleStats = { user: zeroStats(), infraProvider: zeroStats(), internal: zeroStats() };
  readonly maxWaitMs: number;

  constructor(
    cfg: ThrottleConfig,
    private readonly now: () => number,
  ) {
    this.maxWaitMs = cfg.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
    for (const c of CALLER_CLASSES) {
      const b = cfg[c];
      if (b && b.bytesPerSecond > 0 && b.burst > 0) this.buckets[c] = new TokenBucket(b.bytesPerSecond, b.burst, now());
    }
  }

  stats(): ThrottleStats {
    return structuredClone(this.counts);
  }

  /**
   * Whether the state operation running now is a call sent again after a wait (not a call of its own, for a count of
   * calls).
   */
  resending(): boolean {
    return (this.calls.getStore()?.resent ?? 0) > 0;
  }

  /** Runs `fn` (a call's state operation, synchronous or not) as that call: its writes see its deadline. */
  within<T>(call: ThrottleCall, fn: () => T): T {
    return this.calls.run(call, fn);
  }

  /**
   * The etcd state's hook, called by a write after its checks and before it changes anything:
   * returns when the write may go on; throws ThrottleWait, DeadlineExceeded or ResourceExhausted.
   */
  gate(who: Identity, type: string, bytes: () => number): void {
    const cls = classOf(who);
    const bucket = this.buckets[cls];
    if (!bucket) return;
    const count = this.counts[cls];
    const n = Math.max(1, bytes());
    const call = cls === 'internal' ? undefined : this.calls.getStore();
    if (call?.reserved && call.reserved.cls === cls) {
      // The retry of a write that waited for its bytes: they are there now.
      const r = call.reserved;
      call.reserved = undefined;
      count.admitted++;
      count.admittedBytes += r.bytes;
      count.waited++;
      count.waitedMs += r.waitedMs;
      return;
    }
    if (n > bucket.burst) {
      count.failedOversize++;
      throw errorFromStatus(
        GrpcCode.ResourceExhausted,
        `etcd write payload (${n} bytes) exceeds the configured burst (${bucket.burst}) for ` +
          `class=${CLASS_LABEL[cls]}, type=${type}`,
      );
    }
    const t0 = this.now();
    if (!call) {
      // Omni's own controllers here (and writes made outside a gateway call): charged, never delayed.
      bucket.reserve(t0, n, Infinity);
      count.admitted++;
      count.admittedBytes += n;
      return;
    }
    const untilDeadline = call.deadline === undefined ? Infinity : call.deadline - t0;
    const limit = Math.min(untilDeadline, this.maxWaitMs > 0 ? this.maxWaitMs : Infinity);
    const r = bucket.reserve(t0, n, limit);
    if (!r) {
      count.failedTimeout++;
      count.failedTimeoutBytes += n;
      const elapsed = ((this.now() - t0) / 1000).toFixed(3);
      throw errorFromStatus(
        GrpcCode.DeadlineExceeded,
        `etcd write throttled out after ${elapsed}s (class=${CLASS_LABEL[cls]}, type=${type}, bytes=${n}): rate: ` +
          `Wait(n=${n}) would exceed context deadline`,
      );
    }
    if (r.waitMs <= 0) {
      count.admitted++;
      count.admittedBytes += n;
      return;
    }
    throw new ThrottleWait(
      r.waitMs,
      () => {
        count.abandoned++;
        r.cancel(this.now());
      },
      { cls, bytes: n, waitedMs: r.waitMs },
    );
  }
}

/**
 * Serves one call's state operation under the throttle: each ThrottleWait is waited out (`wait`
 * resolves false when the caller went away: the reservation is given back and the call ends
 * Canceled) and the operation sent again with its bytes reserved. A TeardownAndDestroy may wait twice.
 */
export async function throttled<T>(
  t: WriteThrottle | undefined,
  call: ThrottleCall,
  wait: (ms: number) => Promise<boolean>,
  fn: () => T | Promise<T>,
): Promise<T> {
  if (!t) return fn();
  for (let attempt = 0; ; attempt++) {
    try {
      return await t.within(call, fn);
    } catch (e) {
      if (!(e instanceof ThrottleWait) || attempt >= 3) throw e;
      if (!(await wait(e.waitMs))) {
        e.giveBack();
        throw errorFromStatus(GrpcCode.Canceled, 'context canceled');
      }
      call.reserved = e.reserved;
      call.resent = attempt + 1;
    }
  }
}

/**
 * A `Grpc-Timeout` header as grpc-gateway reads it into the call's deadline: an integer and a unit
 * (H, M, S, m, u, n); undefined when absent. Anything else is refused with grpc-gateway's words.
 */
export function grpcTimeoutMs(header: string | string[] | undefined): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (v === undefined || v === '') return undefined;
  const m = /^([+-]?\d+)([HMSmun])$/.exec(v);
  if (!m) throw errorFromStatus(GrpcCode.InvalidArgument, `invalid grpc-timeout: ${v}`);
  const unitMs = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }[m[2] as 'H'];
  return Number(m[1]) * unitMs;
}
