// The progress line on stderr (issue 4 item 8): in place, throttled, below the log lines, gone at
// the end; only on a terminal with pretty logs. Checked with a fake TTY stream and a fake clock, and
// once through `run` against the simulated Omni.

import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ProgressLine, progressFor } from '../../src/commands/progress.js';
import type { ProgressTimers } from '../../src/commands/progress.js';
import { connectionConfig } from '../../src/commands/provider-options.js';
import type { Args, Io } from '../../src/commands/provider-options.js';
import { executeRun } from '../../src/commands/run.js';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/generate.js';

const CLEAR = '\r\x1b[2K';

/** A terminal-like stream that records what is written. */
function fakeTty(columns = 100): PassThrough & { isTTY: boolean; columns: number; text: () => string } {
  const s = new PassThrough() as PassThrough & { isTTY: boolean; columns: number; text: () => string };
  let out = '';
  s.on('data', (d: Buffer) => { out += d.toString(); });
  s.isTTY = true;
  s.columns = columns;
  s.text = () => out;
  return s;
}

function fakeTimers(): ProgressTimers & { advance: (ms: number) => void } {
  let now = 1000;
  let pending: { at: number; fn: () => void } | undefined;
  return {
    now: () => now,
    setTimeout: (fn, ms) => (pending = { at: now + ms, fn }),
    clearTimeout: () => { pending = undefined; },
    advance(ms) {
      now += ms;
      if (pending && pending.at <= now) {
        const p = pending;
        pending = undefined;
        p.fn();
      }
    },
  };
}

const counts = (released: number, remaining: number) => ({ released, blocked: 0, failed: 0, remaining });
const flush = () => new Promise((r) => setImmediate(r));

describe('ProgressLine', () => {
  it('draws in place at once, then at most every 200 ms with the latest counts, and erases itself at the end', async () => {
    const tty = fakeTty();
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 3));
    p.update(counts(1, 2));
    p.update(counts(2, 1));
    await flush();
    expect(tty.text()).toBe(`${CLEAR}stub-provider: 0 released, 0 blocked, 0 failed, 3 remaining`);
    t.advance(199);
    await flush();
    expect(tty.text()).not.toContain('2 released');
    t.advance(1);
    await flush();
    expect(tty.text()).toBe(`${CLEAR}stub-provider: 0 released, 0 blocked, 0 failed, 3 remaining${CLEAR}stub-provider: 2 released, 0 blocked, 0 failed, 1 remaining`);
    expect(tty.text()).not.toContain('\n');
    p.done();
    p.update(counts(3, 0));
    t.advance(1000);
    await flush();
    expect(tty.text().endsWith(CLEAR)).toBe(true);
    expect(tty.text()).not.toContain('3 released');
  });

  it('keeps log lines whole: erases the line before one and redraws it after', async () => {
    const tty = fakeTty();
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 1));
    p.logStream.write('12:00:00 INFO: released\n');
    await flush();
    expect(tty.text()).toBe(`${CLEAR}stub-provider: 0 released, 0 blocked, 0 failed, 1 remaining${CLEAR}12:00:00 INFO: released\n`);
    t.advance(200);
    await flush();
    expect(tty.text().endsWith(`12:00:00 INFO: released\n${CLEAR}stub-provider: 0 released, 0 blocked, 0 failed, 1 remaining`)).toBe(true);
  });

  it('never wider than the terminal', async () => {
    const tty = fakeTty(20);
    new ProgressLine(tty, { timers: fakeTimers() }).update(counts(1234, 5678));
    await flush();
    expect(tty.text()).toBe(`${CLEAR}stub-provider: 1234`);
  });
});

describe('when there is a progress line', () => {
  const cfg = (extra: Args = {}) => connectionConfig({ id: 'x', 'omni-api-endpoint': 'http://127.0.0.1:1', ...extra }, {});
  const io = (stderr: NodeJS.WritableStream): Io => ({ stdout: new PassThrough(), stderr, stdinIsTTY: false, env: {} });

  it('on a terminal with pretty logs (the default there) only', () => {
    expect(progressFor(cfg(), io(fakeTty()))).toBeInstanceOf(ProgressLine);
    expect(progressFor(cfg({ 'log-format': 'pretty' }), io(fakeTty()))).toBeInstanceOf(ProgressLine);
    expect(progressFor(cfg({ 'log-format': 'json' }), io(fakeTty()))).toBeUndefined();
    expect(progressFor(cfg(), io(new PassThrough()))).toBeUndefined();
  });
});

describe('run shows progress on a terminal', () => {
  let sim: Sim | undefined;
  afterEach(async () => { await sim?.close(); });

  const args = (extra: Args = {}): Args => ({ id: 'bm', yes: true, machine: [], 'state-type': [], profile: 'auto', concurrency: 4, output: 'json', 'log-level': 'info', 'step-timeout': '5s', timeout: '10s', deregister: true, wipe: 'none', ...extra });
  const ioFor = (s: Sim, stderr: NodeJS.WritableStream): Io => ({ stdout: new PassThrough().resume(), stderr, stdinIsTTY: false, env: { OMNI_ENDPOINT: s.endpoint, OMNI_SERVICE_ACCOUNT_KEY: s.keys['infra-provider:bm'] }, signals: new EventEmitter() });

  it('counts on stderr during the run, log lines intact, nothing left of it at the end', async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 12 }));
    const tty = fakeTty();
    const rep = await executeRun(args(), ioFor(sim, tty));
    expect(rep.exitCode).toBe(0);
    const text = tty.text();
    expect(text).toContain(`${CLEAR}stub-provider: 0 released, 0 blocked, 0 failed, 12 remaining`);
    expect(text).toMatch(/released/);
    // Each log line starts on a fresh line: after a newline or after the erase of the progress line.
    expect(text).not.toMatch(/remaining[^\r\n]*\n/);
    expect(text.endsWith('\n') || text.endsWith(CLEAR)).toBe(true);
  });

  it('nothing of it with --log-format json on a terminal', async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 3 }));
    const tty = fakeTty();
    const rep = await executeRun(args({ 'log-format': 'json', 'log-level': 'silent' }), ioFor(sim, tty));
    expect(rep.exitCode).toBe(0);
    expect(tty.text()).not.toContain('\r');
  });
});
