// The progress line on stderr (docs/operator-guide.md, "What the terminal shows"): in place, throttled,
// below the log lines, gone at the end; only on a terminal with pretty logs. Checked with a fake TTY
// stream and a fake clock, and once through `run` against the simulated Omni.

import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ProgressLine, itemLine, progressFor } from '../../src/commands/progress.js';
import type { ProgressCounts, ProgressTimers } from '../../src/commands/progress.js';
import { formatClock, phaseText, progressText } from '../../src/commands/progress-text.js';
import { StageTracker } from '../../src/provider/run/stage.js';
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
  total: released + remaining + (o.blocked ?? 0) + (o.failed ?? 0),
  ...o,
});
const line = (released: number, remaining: number, clock = '0s') =>
  `${released}/${released + remaining} released · ${clock}`;
const flush = () => new Promise((r) => setImmediate(r));

describe('ProgressLine', () => {
  it('draws in place at once, then at most every 200 ms with the latest counts; erases itself at the end', async () => {
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
    expect(tty.text()).not.toContain('3/3 released');
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
      '0/0 released · 0s · 10m00s left · 500 running',
      '0/0 released · 1s · 9m59s left · 500 running',
      '0/0 released · 2s · 9m58s left · 500 running',
    ]);
    p.done();
  });

  it('keeps log lines whole: erased before one, put back at once after it (even for lines ms apart)', async () => {
    const tty = fakeTty(200);
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(0, 1));
    p.logStream.write('12:00:00 INFO: released\n');
    p.logStream.write('12:00:00 INFO: released\n');
    await flush();
    expect(tty.text()).toBe(
      `${CLEAR}${line(0, 1)}` + `${CLEAR}12:00:00 INFO: released\n${CLEAR}${line(0, 1)}`.repeat(2),
    );
    // Part of a line: the line is put back once the rest has come (throttled).
    p.logStream.write('12:00:01 INFO: rel');
    await flush();
    expect(tty.text().endsWith(`${CLEAR}12:00:01 INFO: rel`)).toBe(true);
    p.logStream.write('eased\n');
    t.advance(200);
    await flush();
    expect(tty.text().endsWith(`12:00:01 INFO: released\n${CLEAR}${line(0, 1)}`)).toBe(true);
    p.done();
  });

  it('one short line per ended item, above the progress line, escaped and never wider than the terminal', async () => {
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
    expect(before.at(-1)).toMatch(/^1\/2 released · 1 blocked · 1 refused · 0s$/);
    p.done();
    expect(screen(tty.text())).toEqual([
      'released InfraMachine m-1',
      "blocked  MachineRequest r-1\\x1b[2J: waits for Omni's own f…",
      'refused  MachineRequest new-1',
      'deregistered provider bm',
    ]);
    expect(before.every((l) => l.length <= 59)).toBe(true);
  });

  it('never wider than the terminal: a part that does not fit is left out; the first cut when too wide', async () => {
    const tty = fakeTty(20);
    new ProgressLine(tty, { timers: fakeTimers() }).update(counts(1234, 5678, { failed: 3 }));
    await flush();
    expect(tty.text()).toBe(`${CLEAR}1234/6915 released`);
    const narrow = fakeTty(10);
    new ProgressLine(narrow, { timers: fakeTimers() }).update(counts(1234, 5678));
    await flush();
    expect(narrow.text()).toBe(`${CLEAR}1234/691…`);
  });

  it('follows a resize: the next draw fits the new width', async () => {
    const tty = fakeTty(160);
    const t = fakeTimers();
    const p = new ProgressLine(tty, { timers: t });
    p.update(counts(10, 90, { running: 3, waiting: 2, timeLeftMs: 60_000 }));
    await flush();
    tty.columns = 36;
    t.advance(1000);
    await flush();
    expect(tty.text().split(CLEAR).filter(Boolean)).toEqual([
      '10/100 released · 0s · 1m00s left · 3 running · 2 waiting for Omni',
      '10/100 released · 1s · 59s left',
    ]);
    p.done();
  });

  it('says what it does from the first second; erased at the prompt; the clock counts from the answer', async () => {
    const tty = fakeTty(80);
    const t = fakeTimers();
    const stages = new StageTracker(() => t.now());
    const p = new ProgressLine(tty, { timers: t });
    stages.subscribe((e) => p.stage(e));
    stages.enter('preflight');
    t.advance(1000);
    stages.enter('reading');
    stages.enter('reading', { kind: 'InfraMachines.omni.sidero.dev', count: 4000 });
    t.advance(200);
    stages.enter('planning');
    t.advance(200);
    stages.enter('confirming');
    p.pause();
    t.advance(5000);
    const atPrompt = tty.text();
    stages.enter('announcing');
    t.advance(200);
    stages.enter('releasing', { pass: 1, items: 100 });
    p.update(counts(0, 100));
    t.advance(200);
    stages.enter('waiting', { resources: 700, ms: 60_000 });
    t.advance(200);
    p.done();
    expect(screen(atPrompt)).toEqual([]);
    expect(tty.text().split(CLEAR).filter(Boolean)).toEqual([
      'checking the key, the provider and its heartbeat · 0s',
      'checking the key, the provider and its heartbeat · 1s',
      'reading Omni: 4000 InfraMachines · 1s',
      'planning · 1s',
      'announcing stub mode · 0s',
      'releasing 100 item(s) · 0s',
      '0/100 released · 0s',
      '0/100 released · waiting for Omni to destroy 700 resource(s) · 0s',
    ]);
  });
});

describe('progress text', () => {
  const c = (o: Partial<ProgressCounts>): ProgressCounts => ({ ...counts(0, 0), ...o });
  const full = c({ released: 4096, remaining: 2204, total: 6300, running: 3, waiting: 12 });

  it('at 80 columns: done of planned, elapsed, with --wait the time left; no counter that is zero', () => {
    const text = progressText({ counts: full, elapsedMs: 41_000, leftMs: 19 * 60_000 }, 80);
    expect(text).toBe('4096/6300 released · 41s · 19m00s left · 3 running · 12 waiting for Omni');
    expect(progressText({ counts: c({ released: 4096, total: 6300 }), elapsedMs: 41_000 }, 80)).toBe(
      '4096/6300 released · 41s',
    );
    expect(progressText({ counts: c({ released: 4096, total: 6300 }), elapsedMs: 41_000 }, 80)).not.toMatch(/ 0 /);
  });

  it('failures, blocked and refused come right after the count, before the clock', () => {
    expect(
      progressText({
        counts: c({ released: 3, failed: 1, blocked: 2, refused: 1, total: 10 }),
        elapsedMs: 65_000,
        leftMs: 1,
      }),
    ).toBe('3/10 released · 1 failed · 2 blocked · 1 refused · 1m05s · 1s left');
  });

  it.each([40, 80, 100, 160])('never wider than %i columns, the parts in the same order', (columns) => {
    const order = ['released', 'failed', 'blocked', 'refused', 'waiting for Omni to', 'elapsed', 'left', 'running'];
    const text = progressText(
      {
        counts: c({ released: 4096, failed: 12, blocked: 3, refused: 2, total: 6300, running: 3, waiting: 12 }),
        phase: 'waiting for Omni to destroy 2100 resource(s)',
        elapsedMs: 41_000,
        leftMs: 1_140_000,
        throttled: { signals: 12, waitedMs: 3450 },
      },
      columns,
    );
    expect(text.length).toBeLessThan(columns);
    const shown = text.replace(/ \d+(m\d+)?s left/, ' left').replace(/ · \d+s( ·|$)/, ' · elapsed$1');
    const idx = order.map((w) => shown.indexOf(w)).filter((i) => i >= 0);
    expect(idx).toEqual([...idx].sort((a, b) => a - b));
    expect(text.startsWith('4096/6300 released')).toBe(true);
    if (columns >= 80) expect(text).toMatch(/^4096\/6300 released · 12 failed · 3 blocked · 2 refused · /);
  });

  it('says how much Omni throttled the writes, once it has', () => {
    const x = c({ released: 3, total: 5, running: 8 });
    expect(progressText({ counts: x, elapsedMs: 5_000, throttled: { signals: 0, waitedMs: 0 } })).toBe(
      '3/5 released · 5s · 8 running',
    );
    expect(progressText({ counts: x, elapsedMs: 5_000, throttled: { signals: 12, waitedMs: 3_450 } })).toBe(
      '3/5 released · 5s · 8 running · throttled: 12 signals, waited 3.5 s',
    );
  });

  it('names each phase in a few words; nothing for releasing once counted, nor for done', () => {
    expect(phaseText('reading', {})).toBe('reading Omni');
    expect(phaseText('reading', { kind: 'MachineStatus.bare-metal.infraprovider.sidero.dev', count: 7 })).toBe(
      'reading Omni: 7 MachineStatus',
    );
    expect(phaseText('releasing', { items: 4 })).toBe('releasing 4 item(s)');
    expect(phaseText('releasing', { items: 4 }, { counted: true })).toBeUndefined();
    expect(phaseText('waiting', { ms: 30_000 })).toBe('waiting for a change (--wait)');
    expect(phaseText('settling', { items: 2, ms: 5000 })).toBe('settling: 2 item(s) others still hold');
    expect(phaseText('done', {})).toBeUndefined();
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

  it('stderr during the run: a line per machine, the counts, no per-write lines; nothing left at the end', async () => {
    sim = await createSim(generateScenario({ providerId: 'bm', machines: 12 }));
    const tty = fakeTty(200);
    const rep = await run(sim, tty);
    expect(rep.exitCode).toBe(0);
    const text = tty.text();
    // What it is doing from the start, then the counts (the clock's seconds depend on the machine's load;
    // the phases in between, reading Omni..., show when they last, as against the slow Omni of the pty test).
    /* eslint-disable no-control-regex */
    expect(text).toMatch(/\r\x1b\[2Kchecking the key, the provider and its heartbeat · \d+s/);
    expect(text).toMatch(/\r\x1b\[2K\d+\/12 released · \d+s/);
    /* eslint-enable no-control-regex */
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
    expect(text).not.toMatch(/released · [^\r\n]*\n/);
    expect(text.endsWith('\n') || text.endsWith(CLEAR)).toBe(true);
  }, 60_000);

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

  it('off a terminal the JSON logs have a line per machine at info; writes only at debug (audit log)', async () => {
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
