// runWipes: bounded concurrency, one result per machine in input order, failures contained.

import { describe, expect, it } from 'vitest';
import {
  createWipeStrategy,
  runWipes,
  type MachineFacts,
  type WipeResult,
  type WipeStrategy,
} from '../../src/wipe/index.js';
import { silentLogger } from '../../src/log.js';

const machines = (n: number): MachineFacts[] =>
  Array.from({ length: n }, (_, i) => ({ machineId: `m-${i}`, providerId: 'p' }));

/** A strategy that records how many wipes run at once; machine ids in `fail` fail, in `throws` throw. */
class Probe implements WipeStrategy {
  readonly name = 'probe';
  running = 0;
  maxRunning = 0;
  started: string[] = [];
  constructor(private readonly o: { fail?: string[]; throws?: string[]; ms?: number } = {}) {}
  async wipe(m: MachineFacts, signal: AbortSignal): Promise<WipeResult> {
    this.started.push(m.machineId);
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, this.o.ms ?? 5);
        signal.addEventListener('abort', () => {
          clearTimeout(t);
          reject(new Error('aborted'));
        });
      });
      if (this.o.throws?.includes(m.machineId)) throw new Error(`boom on ${m.machineId}`);
      const outcome = this.o.fail?.includes(m.machineId) ? 'failed' : 'succeeded';
      return { machineId: m.machineId, strategy: this.name, outcome, durationMs: 1 };
    } finally {
      this.running--;
    }
  }
}

describe('runWipes', () => {
  it('never runs more wipes at once than the concurrency, and uses it', async () => {
    const probe = new Probe({ ms: 10 });
    const results = await runWipes(probe, machines(20), { concurrency: 3, timeoutMs: 5000 });
    expect(probe.maxRunning).toBe(3);
    expect(results.map((r) => r.machineId)).toEqual(machines(20).map((m) => m.machineId));
    expect(results.every((r) => r.outcome === 'succeeded')).toBe(true);
  });

  it('treats a concurrency below 1 as 1', async () => {
    const probe = new Probe();
    await runWipes(probe, machines(4), { concurrency: 0, timeoutMs: 5000 });
    expect(probe.maxRunning).toBe(1);
  });

  it('a failing or throwing machine does not stop the others', async () => {
    const probe = new Probe({ fail: ['m-1'], throws: ['m-2'] });
    const results = await runWipes(probe, machines(5), { concurrency: 2, timeoutMs: 5000 });
    expect(probe.started.sort()).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4']);
    expect(results.map((r) => r.outcome)).toEqual(['succeeded', 'failed', 'failed', 'succeeded', 'succeeded']);
    expect(results[2]).toMatchObject({ machineId: 'm-2', strategy: 'probe', reason: 'wipe error: boom on m-2' });
  });

  it('gives up on a strategy that ignores its signal, shortly after the timeout', async () => {
    const stuck: WipeStrategy = { name: 'stuck', wipe: () => new Promise<WipeResult>(() => undefined) };
    const started = Date.now();
    const [r] = await runWipes(stuck, machines(1), { concurrency: 1, timeoutMs: 50, abortGraceMs: 50 });
    expect(r).toMatchObject({
      machineId: 'm-0',
      strategy: 'stuck',
      outcome: 'failed',
      reason: 'timed out after 50 ms',
    });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('on interruption, reports the running wipes as interrupted and does not start the rest', async () => {
    const ac = new AbortController();
    const probe = new Probe({ ms: 10_000 });
    setTimeout(() => ac.abort(new Error('SIGTERM')), 30);
    const results = await runWipes(probe, machines(4), {
      concurrency: 2,
      timeoutMs: 20_000,
      signal: ac.signal,
      abortGraceMs: 20,
    });
    expect(probe.started).toEqual(['m-0', 'm-1']);
    expect(results.map((r) => r.outcome)).toEqual(['failed', 'failed', 'skipped', 'skipped']);
    expect(results[2]!.reason).toBe('interrupted before the wipe started');
  });

  it('scrubs the BMC password from any reason a strategy gives', async () => {
    const leaky: WipeStrategy = {
      name: 'leaky',
      wipe: async (m) => ({
        machineId: m.machineId,
        strategy: 'leaky',
        outcome: 'failed',
        reason: `login with ${m.bmc?.password} failed`,
        durationMs: 0,
      }),
    };
    const [r] = await runWipes(leaky, [{ machineId: 'm', providerId: 'p', bmc: { password: 'hunter2' } }], {
      concurrency: 1,
      timeoutMs: 1000,
    });
    expect(r!.reason).toBe('login with [redacted] failed');
  });

  it('returns an empty list for no machines', async () => {
    expect(await runWipes(new Probe(), [], { concurrency: 4, timeoutMs: 1000 })).toEqual([]);
  });
});

describe('none', () => {
  it('skips every machine with "no wipe strategy"', async () => {
    const s = createWipeStrategy(
      { strategy: 'none', timeoutMs: 1000, requireWipe: false, concurrency: 1 },
      { logger: silentLogger() },
    );
    const results = await runWipes(s, machines(2), { concurrency: 2, timeoutMs: 1000 });
    expect(results.map((r) => [r.machineId, r.strategy, r.outcome, r.reason])).toEqual([
      ['m-0', 'none', 'skipped', 'no wipe strategy'],
      ['m-1', 'none', 'skipped', 'no wipe strategy'],
    ]);
  });
});
