// Runs a strategy over many machines: bounded concurrency, a timeout per machine, and one result per
// machine, in input order. One machine's failure (even a thrown error) never stops the others.

import type { Logger } from 'pino';
import { abortedByTimeout, monotonicNow, scrubSecrets, type Clock } from './result.js';
import { Reason, type MachineFacts, type WipeResult, type WipeStrategy } from './types.js';

export interface RunWipesOptions {
  concurrency: number;
  timeoutMs: number;
  signal?: AbortSignal;
  logger?: Logger;
  now?: Clock;
  /** How long after the abort a strategy that ignores its signal is given up on (3 s). */
  abortGraceMs?: number;
}

export async function runWipes(
  strategy: WipeStrategy,
  machines: MachineFacts[],
  opts: RunWipesOptions,
): Promise<WipeResult[]> {
  const results: WipeResult[] = new Array<WipeResult>(machines.length);
  const workers = Math.max(1, Math.min(Math.floor(opts.concurrency) || 1, machines.length));
  let next = 0;
  const worker = async () => {
    while (next < machines.length) {
      const i = next++;
      const r = await wipeOne(strategy, machines[i]!, opts);
      opts.logger?.info(
        { machineId: r.machineId, wipe: r.strategy, outcome: r.outcome, reason: r.reason, durationMs: r.durationMs },
        'wipe result',
      );
      results[i] = r;
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  return results;
}

async function wipeOne(strategy: WipeStrategy, m: MachineFacts, opts: RunWipesOptions): Promise<WipeResult> {
  const now = opts.now ?? monotonicNow;
  const started = now();
  const result = (outcome: WipeResult['outcome'], reason: string): WipeResult => ({
    machineId: m.machineId,
    strategy: strategy.name,
    outcome,
    reason: scrubSecrets(reason, [m.bmc?.password]),
    durationMs: Math.max(0, Math.round(now() - started)),
  });
  if (opts.signal?.aborted) return result('skipped', `${Reason.interrupted} before the wipe started`);

  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  // A strategy that ignores its signal must still not hold the run long past the timeout; it gets a
  // grace period to report its own, more precise, outcome first.
  let graceTimer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    graceTimer = setTimeout(() => settleAborted(), opts.abortGraceMs ?? 3000);
  };
  let settleAborted: () => void = () => undefined;
  const aborted = new Promise<WipeResult>((resolve) => {
    settleAborted = () =>
      resolve(
        abortedByTimeout(signal)
          ? result('failed', `timed out after ${opts.timeoutMs} ms`)
          : result('failed', Reason.interrupted),
      );
  });
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const r = await Promise.race([strategy.wipe(m, signal), aborted]);
    return r.reason === undefined ? r : { ...r, reason: scrubSecrets(r.reason, [m.bmc?.password]) };
  } catch (err) {
    return result('failed', `wipe error: ${(err as Error)?.message ?? String(err)}`);
  } finally {
    signal.removeEventListener('abort', onAbort);
    if (graceTimer) clearTimeout(graceTimer);
  }
}
