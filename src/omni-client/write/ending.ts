// How a write ends when it is not sent (again) (pressure.ts): throttled until its sends or its time
// ran out (STUB_THROTTLED), the caller's time for writes over (STUB_DEADLINE), or larger than Omni's
// write burst (STUB_WRITE_TOO_LARGE): the errors, with what the write went through.

import { escapeControl } from '../../omni-api/untrusted.js';
import type { Pointer } from '../../omni-api/resource.js';
import { describePointer } from '../../omni-api/resource.js';
import type { CallOptions } from '../../omni-api/state.js';
import { DeadlineReachedError, ThrottledError, WriteTooLargeError } from '../errors.js';

export interface WriteCall {
  method: 'Create' | 'Update' | 'Destroy';
  resource: Pointer;
  opts: CallOptions;
}

/** One write's sends so far: counts, its last failure, until when it may be retried. */
export interface Tries {
  sends: number;
  signals: number;
  lost: number;
  firstFailureAt?: number;
  deadline: number;
  last?: unknown;
}

function where(w: WriteCall, t?: Tries) {
  return {
    resource: w.resource,
    method: `/cosi.resource.State/${w.method}`,
    ...(t?.last !== undefined ? { cause: t.last } : {}),
  };
}

/** Its sends or its time for retries ran out under back-pressure. */
export function throttled(w: WriteCall, t: Tries, why: string, now: number): ThrottledError {
  return new ThrottledError(
    `${w.method} ${escapeControl(describePointer(w.resource))}: throttled by Omni: ${why}${history(t, now)}; ` +
      'nothing more was sent. Run again later (a run reads it again and carries on), or with a lower --concurrency',
    where(w, t),
  );
}

/** The caller's time for writes (`notAfter`) is over: not sent, or not sent again. */
export function late(w: WriteCall, t: Tries, now: number): DeadlineReachedError {
  return new DeadlineReachedError(
    `${w.method} ${escapeControl(describePointer(w.resource))}: not sent${t.sends > 0 ? ' again' : ''}: the time ` +
      `for writes (--timeout) had passed${history(t, now)}`,
    where(w, t),
  );
}

/** Omni's ResourceExhausted: larger than its burst. Sent once, never again (verdict.ts `permanent`). */
export function tooLarge(w: WriteCall, err: unknown): WriteTooLargeError {
  return new WriteTooLargeError(
    `${w.method} ${escapeControl(describePointer(w.resource))}: Omni refused this write as larger than its write ` +
      `budget's burst for infra providers (${(err as Error).message}). No wait or retry can let it through, so it ` +
      "was sent once and the run stopped. An Omni admin must raise that burst above the size Omni names (Omni's " +
      'setting storage.rateLimits.etcd.infraProvider.writeBytesBurst, flag ' +
      '--storage-rate-limits-etcd-infra-provider-write-bytes-burst), then run again',
    { ...where(w), cause: err },
  );
}

/** " after 3 back-pressure answers within 2.1 s (last: ...)", or nothing before a failure. */
function history(t: Tries, now: number): string {
  const spent = t.firstFailureAt !== undefined ? ` within ${((now - t.firstFailureAt) / 1000).toFixed(1)} s` : '';
  const what = [
    t.signals ? `${t.signals} back-pressure answer${t.signals > 1 ? 's' : ''}` : '',
    t.lost ? `${t.lost} lost answer${t.lost > 1 ? 's' : ''}` : '',
  ]
    .filter(Boolean)
    .join(' and ');
  return `${what ? ` after ${what}${spent}` : ''}${t.last instanceof Error ? ` (last: ${t.last.message})` : ''}`;
}
