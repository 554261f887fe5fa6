// The progress line on stderr (issue 4 item 8): in place, throttled, below the log lines, gone at
// the end; only on a terminal with pretty logs. Checked with a fake TTY stream and a fake clock, and
// once through `run` against the simulated Omni.

import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ProgressLine, formatClock, itemLine, progressFor, progressText } from '../../src/commands/progress.js';
import type { ProgressCounts, ProgressTimers } from '../../src/commands/progress.js';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { fakeTty, runConfigFrom, runIn, testIo } from '../helpers/cli-config.js';

const CLEAR = '\r\x1b[2K';

/** What a terminal shows after these bytes: "\r" + erase line empties the current line. */
function screen(bytes: string): string[] {
  const lines: string[] = [];
  let current = '';
  // eslint-disable-next-line no-control-regex
  for (const part of bytes.split(/(\r\x1b\[2K|\n)/)) {
    if (part === CLEAR) current = '';
    else if (part === '\n') {
      lines.push(current);
      current = '';
    } else current += part;
  }
  return current === '' ? lines : [...lines, current];
}

function fakeTimers(): ProgressTimers & { advance: (ms: number) => void } {
  let now = 1000;
  let pending: { at: number; fn: () => void } | undefined;
  return {
    now: () => now,
    setTimeout: (fn, ms) => (pending = { at: now + ms, fn }),
    clearTimeout: () => {
      pending = undefined;
    },
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

const counts = (released: number, remaining: number, o: Partial<ProgressCounts> = {}): ProgressCounts => ({
  released,
  refused: 0,
  blocked: 0,
  failed: 0,
  running: 0,
  waiting: 0,
  remaining,
  ...o,
});
const line = (released: number, remaining: number, clock = '0s elapsed') =>
  `stub-provider: ${released} released, 0 refused, 0 blocked, 0 failed · 0 running, 0 waiting, ${remaining} ` +
  `remaining · ${clock}`;
const flush = () => new Promise((r) => setImmediate(r));

describe('ProgressLine', () => {
  it(`draws in place at once, then at most every 200 ms with the latest counts, and erases itself at the \
end`, async () => {
    const tty = fakeTty(200);
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 3));
    p.update(counts(1, 2));
    p.update(counts(2, 1));
    await flush();
    expect(tty.text()).toBe(`${CLEAR}${line(0, 3)}`);
    t.advance(199);
    await flush();
    expect(tty.text()).not.toContain('2 released');
    t.advance(1);
    await flush();
    expect(tty.text()).toBe(`${CLEAR}${line(0, 3)}${CLEAR}${line(2, 1)}`);
    expect(tty.text()).not.toContain('\n');
    p.done();
    p.update(counts(3, 0));
    t.advance(1000);
    await flush();
    expect(tty.text().endsWith(CLEAR)).toBe(true);
    expect(tty.text()).not.toContain('3 released');
  });

  it('every second while nothing changes, so that the elapsed time and the time left (--wait) move on', async () => {
    const tty = fakeTty(200);
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 0, { running: 500, timeLeftMs: 600_000 }));
    t.advance(1000);
    t.advance(1000);
    await flush();
    const draws = tty.text().split(CLEAR).filter(Boolean);
    expect(draws).toEqual([
      'stub-provider: 0 released, 0 refused, 0 blocked, 0 failed · 500 running, 0 waiting, 0 remaining · 0s elapsed, ' +
        '10m00s left',
      'stub-provider: 0 released, 0 refused, 0 blocked, 0 failed · 500 running, 0 waiting, 0 remaining · 1s elapsed, ' +
        '9m59s left',
      'stub-provider: 0 released, 0 refused, 0 blocked, 0 failed · 500 running, 0 waiting, 0 remaining · 2s elapsed, ' +
        '9m58s left',
    ]);
    p.done();
  });

  it('keeps log lines whole: erases the line before one and redraws it after', async () => {
    const tty = fakeTty(200);
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 1));
    p.logStream.write('12:00:00 INFO: released\n');
    await flush();
    expect(tty.text()).toBe(`${CLEAR}${line(0, 1)}${CLEAR}12:00:00 INFO: released\n`);
    t.advance(200);
    await flush();
    expect(tty.text().endsWith(`12:00:00 INFO: released\n${CLEAR}${line(0, 1)}`)).toBe(true);
    p.done();
  });

  it(`one short line per item that ended, above the progress line, escaped and never wider than the \
terminal`, async () => {
    const tty = fakeTty(60);
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 2));
    p.update(counts(1, 1), { kind: 'InfraMachine', id: 'm-1', status: 'released' });
    p.update(counts(1, 0, { blocked: 1 }), {
      kind: 'MachineRequest',
      id: 'r-1\x1b[2J',
      status: 'blocked',
      reason: "waits for Omni's own finalizer ClusterMachineRequestStatusController",
    });
    p.update(counts(1, 0, { blocked: 1, refused: 1 }), { kind: 'MachineRequest', id: 'new-1', status: 'refused' });
    p.update(counts(1, 0, { blocked: 1, refused: 1 }), { kind: 'InfraMachine', id: 'm-2', status: 'interrupted' });
    p.update(counts(1, 0, { blocked: 1, refused: 1 }), { kind: 'deregistration', id: 'bm', status: 'released' });
    t.advance(200);
    const before = screen(tty.text());
    expect(before.at(-1)).toMatch(/^stub-provider: 1 released, 1 refused, 1 blocked/);
    p.done();
    expect(screen(tty.text())).toEqual([
      'released InfraMachine m-1',
      "blocked  MachineRequest r-1\\x1b[2J: waits for Omni's own f…",
      'refused  MachineRequest new-1',
      'deregistered provider bm',
    ]);
    expect(before.every((l) => l.length <= 59)).toBe(true);
  });

  it('never wider than the terminal', async () => {
    const tty = fakeTty(20);
    new ProgressLine(tty, { timers: fakeTimers() }).update(counts(1234, 5678));
    await flush();
    expect(tty.text()).toBe(`${CLEAR}stub-provider: 123…`);
  });
});

describe('progress text', () => {
  it('counts what ended, what is open, and the clock', () => {
    expect(
      progressText(
        { released: 3, refused: 1, blocked: 2, failed: 1, running: 500, waiting: 4, remaining: 10, timeLeftMs: 1 },
        65_000,
        1,
      ),
    ).toBe(
      'stub-provider: 3 released, 1 refused, 2 blocked, 1 failed · 500 running, 4 waiting, 10 remaining · 1m05s ' +
        'elapsed, 1s left',
    );
  });

  it('says how much Omni throttled the writes, once it has', () => {
    const c = { released: 3, refused: 0, blocked: 0, failed: 0, running: 8, waiting: 0, remaining: 2 };
    expect(progressText(c, 5_000, undefined, { signals: 0, waitedMs: 0 })).toBe(
      'stub-provider: 3 released, 0 refused, 0 blocked, 0 failed · 8 running, 0 waiting, 2 remaining · 5s elapsed',
    );
    expect(progressText(c, 5_000, undefined, { signals: 12, waitedMs: 3_450 })).toBe(
      'stub-provider: 3 released, 0 refused, 0 blocked, 0 failed · 8 running, 0 waiting, 2 remaining · 5s elapsed · ' +
        'throttled: 12 signals, waited 3.5 s',
    );
  });

  it("the progress line reads the client's throttling at every draw", async () => {
    const tty = fakeTty(200);
    const line = new ProgressLine(tty, { timers: fakeTimers() });
    line.throttling = () => ({ signals: 1, waitedMs: 200 });
    line.update(counts(1, 2));
    await flush();
    expect(tty.text()).toContain('· throttled: 1 signal, waited 0.2 s');
  });

  it('formats durations for a person', () => {
    expect(
      [0, 999, 42_000, 60_000, 185_000, 3_599_999, 3_600_000, 3_725_000, 90_000_000].map((ms) => formatClock(ms)),
    ).toEqual(['0s', '0s', '42s', '1m00s', '3m05s', '59m59s', '1h00m', '1h02m', '25h00m']);
    expect(formatClock(1, true)).toBe('1s');
    expect(formatClock(-5, true)).toBe('0s');
  });

  it('item lines', () => {
    expect(itemLine({ kind: 'InfraMachine', id: 'm', status: 'failed', reason: 'Omni said\nno' })).toBe(
      'failed   InfraMachine m: Omni said\\nno',
    );
    expect(itemLine({ kind: 'InfraMachine', id: 'm', status: 'interrupted' })).toBe('interrupted InfraMachine m');
    expect(
      itemLine({
        kind: 'InfraMachine',
        id: 'm',
        status: 'released',
        reason: 'ClusterMachineController: the machine leaving its cluster',
      }),
    ).toBe('released InfraMachine m; still held by ClusterMachineController: the machine leaving its cluster');
  });
});

describe('when there is a progress line', () => {
  const cfg = (extra: string[] = []) =>
    runConfigFrom(['--id', 'x', '--omni-api-endpoint', 'http://127.0.0.1:1', ...extra]);
  const io = (stderr: NodeJS.WritableStream) => testIo({}, { stderr });

  it('on a terminal with pretty logs (the default there) only', () => {
    expect(progressFor(cfg(), io(fakeTty()))).toBeInstanceOf(ProgressLine);
    expect(progressFor(cfg(['--log-format', 'pretty']), io(fakeTty()))).toBeInstanceOf(ProgressLine);
    expect(progressFor(cfg(['--log-format', 'json']), io(fakeTty()))).toBeUndefined();
    expect(progressFor(cfg(), io(new PassThrough()))).toBeUndefined();
  });
});

describe('run shows progress on a terminal', () => {
  let sim: Sim | undefined;
  afterEach(async () => {
    await sim?.close();
  });

  /** `run` as provider bm, four calls at a time, with these log flags (the logs are what is checked). */
  const run = (s: Sim, stderr: NodeJS.WritableStream, logFlags = ['--log-level', 'info']) =>
    runIn(s, 'bm', ['--concurrency', '4', ...logFlags], { stderr });

  it(`one short line per machine and the counts on stderr during the run; no per-write lines; nothing left of it at \
the end`, async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 12 }));
    const tty = fakeTty(200);
    const rep = await run(sim, tty);
    expect(rep.exitCode).toBe(0);
    const text = tty.text();
    expect(text).toContain(
      `${CLEAR}stub-provider: 0 released, 0 refused, 0 blocked, 0 failed · 0 running, 0 waiting, 12 remaining · 0s ` +
        `elapsed`,
    );
    const shown = screen(text);
    expect(shown.filter((l) => l.startsWith('released '))).toEqual(
      rep.released.map((r) => `released InfraMachine ${r.id}`),
    );
    expect(shown.filter((l) => l.startsWith('released '))).toHaveLength(12);
    expect(shown).toContain('deregistered provider bm');
    // The log lines that stay at info: one line each, and not one per write (those are debug here).
    const logLines = shown
      .filter((l) => /^\[\d\d:\d\d:\d\d\] /.test(l))
      // eslint-disable-next-line no-control-regex
      .map((l) => l.replace(/\x1b\[[0-9;]*m/g, ''));
    expect(logLines.map((l) => /^\S+ (\w+): ([^{]*)/.exec(l)?.slice(1, 3).join(' ').trim())).toEqual([
      'INFO preflight passed',
      'INFO announced stub mode: ProviderStatus says decommissioning; heartbeats every 30 s',
    ]);
    expect(shown).toHaveLength(12 + 1 + 2);
    // Each log line starts on a fresh line: after a newline or after the erase of the progress line.
    expect(text).not.toMatch(/remaining[^\r\n]*\n/);
    expect(text.endsWith('\n') || text.endsWith(CLEAR)).toBe(true);
  });

  it('--log-level debug on a terminal: the per-write and per-item log lines too, one line each', async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 2 }));
    const tty = fakeTty(200);
    const rep = await run(sim, tty, ['--log-level', 'debug']);
    expect(rep.exitCode).toBe(0);
    // eslint-disable-next-line no-control-regex
    const shown = screen(tty.text()).map((l) => l.replace(/\x1b\[[0-9;]*m/g, ''));
    expect(
      shown.filter((l) => / DEBUG: destroyed \{"op":"destroy","resource":"infra-provider:bm\//.test(l)).length,
    ).toBeGreaterThanOrEqual(2 * 5);
    expect(shown.filter((l) => / DEBUG: released \{"kind":"InfraMachine"/.test(l))).toHaveLength(2);
    expect(shown.filter((l) => l.startsWith('released InfraMachine '))).toHaveLength(2);
  });

  it(`off a terminal the JSON logs have a line per machine at info; the writes only at debug (the audit log has \
them)`, async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 3 }));
    const lines = async (flags: string[]) => {
      const stderr = new PassThrough();
      let out = '';
      stderr.on('data', (d: Buffer) => {
        out += d.toString();
      });
      const rep = await run(sim!, stderr, flags);
      expect(rep.exitCode).toBe(0);
      expect(out).not.toContain('\r');
      return out
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    };
    const info = await lines(['--log-level', 'info']);
    expect(info.filter((l) => typeof l['op'] === 'string')).toEqual([]);
    expect(info.filter((l) => l['msg'] === 'released' && l['kind'] === 'InfraMachine').map((l) => l['level'])).toEqual([
      'info',
      'info',
      'info',
    ]);
    await sim.close();
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 3 }));
    const writes = (await lines(['--log-level', 'debug'])).filter((l) => typeof l['op'] === 'string');
    expect(writes.length).toBeGreaterThanOrEqual(3 * 7);
    expect(writes.every((l) => l['level'] === 'debug')).toBe(true);
  });

  it('nothing of it with --log-format json on a terminal', async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 3 }));
    const tty = fakeTty(200);
    const rep = await run(sim, tty, ['--log-format', 'json', '--log-level', 'silent']);
    expect(rep.exitCode).toBe(0);
    expect(tty.text()).not.toContain('\r');
  });
});
