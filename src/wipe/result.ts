// Building results: one place measures the duration and keeps secrets out of the reason.

import type { MachineFacts, WipeOutcome, WipeResult } from './types.js';

export type Clock = () => number;

export const monotonicNow: Clock = () => performance.now();

const REDACTED = '[redacted]';

/** Replaces every occurrence of each non-empty secret in text. */
export function scrubSecrets(text: string, secrets: ReadonlyArray<string | undefined>): string {
  let out = text;
  for (const s of secrets) {
    if (s) out = out.split(s).join(REDACTED);
  }
  return out;
}

/** Starts timing a wipe of one machine; `finish` builds its result with the password scrubbed. */
export function startResult(strategy: string, m: MachineFacts, now: Clock = monotonicNow) {
  const started = now();
  return (outcome: WipeOutcome, reason?: string): WipeResult => {
    const r: WipeResult = {
      machineId: m.machineId,
      strategy,
      outcome,
      durationMs: Math.max(0, Math.round(now() - started)),
    };
    if (reason !== undefined) r.reason = scrubSecrets(reason, [m.bmc?.password]);
    return r;
  };
}

/** True when the signal was aborted by a timeout rather than by an interruption of the run. */
export function abortedByTimeout(signal: AbortSignal): boolean {
  const r = signal.reason as { name?: string } | undefined;
  return signal.aborted && r?.name === 'TimeoutError';
}
