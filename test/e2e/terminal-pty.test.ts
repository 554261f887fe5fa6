// The built CLI on a real pseudo-terminal (tmux), against `stub-provider sim`, read back as a person
// sees it (capture-pane). At 160x50: the confirmation prompt, the declined path
// (Enter: nothing changed, no last step, exit 10), and a --wait run with NO_COLOR: one short line per
// machine, one progress line at the bottom redrawn in place (not hundreds), no colour at all, and
// after the timeout no last step either. At 80 columns (docs/operator-guide.md, "What the terminal
// shows"): the progress line fits (released of planned, the clock, the time left; no zero counter), the
// plan and the prompt are wrapped at the width between words, and a slow Omni is never a blank screen:
// from the first second the bottom row says what the command is doing (also for `plan > file`, whose
// file is not wrapped); Ctrl-C while it releases: interrupted and not started, never failed.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bareMetalMachine, generateScenario, machineUuid } from '../../src/omni-sim/scenario/generate.js';
import type { Report } from '../../src/provider/report/report.js';
import { MAIN } from '../helpers/cli-process.js';
import { startSimProcess } from '../helpers/sim-process.js';
import type { SimProcess } from '../helpers/sim-process.js';
import { TmuxTerminal, rows, tmuxMissing } from '../helpers/tmux.js';

const ID = 'bare-metal';
const STUCK = 40;
const RUNNING = 3;
/** Any colour or attribute sequence (SGR). */
const SGR = /\x1b\[[0-9;]*m/; // eslint-disable-line no-control-regex
const PROGRESS = /^\d+\/\d+ released · /;
const EXITED = /^\[exit (\d+)\]$/m;

let dir: string;
let sim: SimProcess;
/** The same machines behind an Omni that takes 600 ms to answer each call: seconds of reading. */
let slow: SimProcess;
/** The same machines again, for the 80-column run (the 160-column one releases sim's). */
let narrow: SimProcess;
const terminals: TmuxTerminal[] = [];

beforeAll(async () => {
  const missing = tmuxMissing();
  if (missing) throw new Error(missing);
  expect(existsSync(MAIN), 'run `npm run build` first').toBe(true);
  dir = await mkdtemp(join(tmpdir(), 'terminal-pty-'));
  const scenario = generateScenario({ providerId: ID, machines: STUCK, omniVersion: '1.3.4' });
  for (let i = 0; i < RUNNING; i++)
    scenario.resources.push(...bareMetalMachine(ID, machineUuid(i, 1), { phase: 'running' }));
  sim = await startSimProcess(scenario, dir);
  const slowDir = join(dir, 'slow');
  await mkdir(slowDir);
  slow = await startSimProcess({ ...scenario, faults: { latencyMs: 600 } }, slowDir);
  const narrowDir = join(dir, 'narrow');
  await mkdir(narrowDir);
  narrow = await startSimProcess(scenario, narrowDir);
}, 30_000);

afterAll(async () => {
  for (const t of terminals.splice(0)) t.close();
  await sim?.stop();
  await slow?.stop();
  await narrow?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * A terminal running the CLI with `args` in a clean environment (the key and endpoint only, and
 * NO_COLOR when asked), then `[exit N]`, then nothing, so that the screen can be read at leisure.
 */
async function terminal(
  name: string,
  args: string[],
  o: { noColor: boolean; columns?: number; omni?: SimProcess; stdout?: string },
): Promise<TmuxTerminal> {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const omni = o.omni ?? sim;
  const env = [
    `PATH=${q(process.env.PATH ?? '/usr/bin:/bin')}`,
    'TERM="$TERM"',
    `OMNI_ENDPOINT=${q(omni.endpoint)}`,
    `OMNI_SERVICE_ACCOUNT_KEY=${q(omni.keys[`infra-provider:${ID}`]!)}`,
    ...(o.noColor ? ['NO_COLOR=1'] : []),
  ];
  const script = join(dir, `${name}.sh`);
  const out = o.stdout ? ` > ${q(o.stdout)}` : '';
  await writeFile(
    script,
    // Ctrl-C reaches the shell too: trapped (not ignored, so the CLI gets it as a person's would), it
    // outlives the CLI and says how it exited.
    `trap : INT\n` +
      `env -i ${env.join(' ')} ${q(process.execPath)} ${q(MAIN)} ${args.map(q).join(' ')}${out}\necho "[exit $?]"\n` +
      `exec sleep 600\n`,
  );
  await chmod(script, 0o700);
  const t = new TmuxTerminal(join(dir, `${name}.sock`), name, { columns: o.columns ?? 160, rows: 50 });
  terminals.push(t);
  t.start(`sh ${q(script)}`);
  return t;
}

/** What a run would write now, from `plan --output json` (not on a terminal). */
function plannedWrites(): number {
  const r = spawnSync(process.execPath, [MAIN, 'plan', '--id', ID, '--output', 'json', '--log-level', 'silent'], {
    env: {
      PATH: process.env.PATH,
      OMNI_ENDPOINT: sim.endpoint,
      OMNI_SERVICE_ACCOUNT_KEY: sim.keys[`infra-provider:${ID}`],
    },
    encoding: 'utf8',
    timeout: 30_000,
  });
  // 10: changes pending (plan's exit codes predict run's).
  expect(r.status, r.stderr).toBe(10);
  return (JSON.parse(r.stdout) as Report).planned!.writes;
}

describe('stub-provider on a real terminal (tmux, 160x50)', () => {
  it('the prompt shows the plan; Enter declines: nothing changed, no last step, what to do instead', async () => {
    const before = plannedWrites();
    expect(before).toBeGreaterThan(STUCK);
    const t = await terminal('declined', ['--id', ID], { noColor: false });
    const prompt = await t.waitFor('the confirmation prompt', (s) => /^Make these changes\? \[y\/N\] $/m.test(s));
    expect(prompt).toContain(`Would release or clean (${STUCK}):`);
    expect(prompt).toMatch(/^ {6}remove-finalizers MachineStatus → destroy MachineStatus → destroy PowerOperation → /m);
    expect(rows(prompt).every((l) => l.length <= 160)).toBe(true);
    t.send('Enter');
    const screen = await t.waitFor('the end of the run', (s) => EXITED.test(s));
    // 10: nothing was written, the changes the plan showed are still pending (plan's 10).
    expect(EXITED.exec(screen)![1]).toBe('10');
    const after = screen.slice(screen.indexOf('Make these changes?'));
    expect(after).toContain('Result: declined');
    expect(after).toContain('Next: nothing was changed; run again and answer y, or see `stub-provider plan`.');
    expect(after).not.toContain('Last step');
    // The command appears only as what not to run yet.
    expect(after.split('\n').filter((l) => l.includes(`omnictl infraprovider delete ${ID}`))).toEqual([
      expect.stringMatching(/^Keep the registration until a run reports "Deregistration: deregistered"/),
    ]);
    // Without NO_COLOR the log lines are coloured: the check of the next test can see colour.
    expect(t.capture({ history: true, escapes: true })).toMatch(SGR);
    t.close();
    expect(plannedWrites()).toBe(before);
  }, 60_000);

  it('NO_COLOR, y, --wait: line per machine, progress redrawn below, no colour; timeout: no last step', async () => {
    const t = await terminal('wait', ['--id', ID, '--wait', '--timeout', '8s'], { noColor: true });
    await t.waitFor('the confirmation prompt', (s) => /^Make these changes and keep watching\? \[y\/N\] $/m.test(s));
    t.send('y', 'Enter');
    // The stuck machines are released; the running ones keep --wait waiting, the clock on the line moving.
    const waiting = new RegExp(
      `^${STUCK}/${STUCK} released · (waiting for a change \\(--wait\\) · )?\\d+s · \\d+s left · ${RUNNING} running$`,
    );
    const first = await t.waitFor('the progress line with every stuck machine released', (s) =>
      waiting.test(rows(s).at(-1) ?? ''),
    );
    await delay(1_500);
    const second = t.capture({ history: true });
    for (const screen of [first, second]) {
      const lines = rows(screen);
      expect(
        lines.filter((l) => PROGRESS.test(l)),
        screen,
      ).toEqual([lines.at(-1)]);
    }
    expect(rows(second).at(-1)).toMatch(waiting);
    expect(rows(second).at(-1)).not.toBe(rows(first).at(-1));
    // One short line per released machine, nothing per write.
    const released = rows(second).filter((l) => l.startsWith('released '));
    expect(released).toHaveLength(STUCK);
    expect(new Set(released)).toEqual(
      new Set(Array.from({ length: STUCK }, (_, i) => `released InfraMachine ${machineUuid(i)}`)),
    );
    expect(second).not.toMatch(/INFO: (updated|destroyed|created)/);
    expect(rows(second).length).toBeLessThan(200);

    const end = await t.waitFor('the end of the run', (s) => EXITED.test(s), { timeoutMs: 30_000 });
    expect(EXITED.exec(end)![1]).toBe('5');
    const summary = end.slice(end.lastIndexOf('Result: '));
    expect(summary).toMatch(/^Result: incomplete/);
    expect(summary).toContain('Timed out before everything was released (--timeout).');
    expect(summary).toContain(
      'Next: not everything was released (the reasons are above); run again: it carries on where this run stopped.',
    );
    expect(summary).not.toContain('Last step');
    // The progress line is gone; the summary took its place.
    expect(rows(end).filter((l) => PROGRESS.test(l))).toEqual([]);
    expect(t.capture({ history: true, escapes: true })).not.toMatch(SGR);
  }, 60_000);
});

describe('stub-provider on an 80-column terminal', () => {
  it('at 80 columns the progress line fits and the plan is wrapped between words by the stub', async () => {
    const t = await terminal('wait80', ['--id', ID, '--wait', '--timeout', '8s'], {
      noColor: true,
      columns: 80,
      omni: narrow,
    });
    const prompt = await t.waitFor('the confirmation prompt', (s) =>
      /^Make these changes and keep watching\? /m.test(s),
    );
    // Joined rows (capture -J) longer than 80 would be lines the terminal broke, wherever it was; the
    // log lines (pino-pretty's, one per entry) and the error line on stderr are not the plan or summary.
    const text = (screen: string) =>
      rows(screen).filter((l) => !/^\[\d\d:\d\d:\d\d\] /.test(l) && !l.startsWith('stub-provider: '));
    expect(text(prompt).filter((l) => l.length > 80)).toEqual([]);
    expect(prompt).toMatch(/^ {6}remove-finalizers MachineStatus → /m);
    t.send('y', 'Enter');
    const waiting = new RegExp(
      `^${STUCK}/${STUCK} released · (waiting for a change \\(--wait\\) · )?\\d+s · \\d+s left · ${RUNNING} running$`,
    );
    const shown = await t.waitFor('every stuck machine released, at 80 columns', (s) =>
      waiting.test(rows(s).at(-1) ?? ''),
    );
    expect(rows(shown).at(-1)!.length).toBeLessThan(80);
    expect(text(shown).filter((l) => l.length > 80)).toEqual([]);
    const end = await t.waitFor('the end of the run', (s) => EXITED.test(s), { timeoutMs: 30_000 });
    expect(EXITED.exec(end)![1]).toBe('5');
    expect(text(end).filter((l) => l.length > 80)).toEqual([]);
    expect(end).toMatch(/^Took \d+(\.\d)? s\.$/m);
  }, 60_000);

  it('a slow Omni is never a blank screen: from the first second the bottom row says what the run does', async () => {
    const t = await terminal('slow80', ['--id', ID], { noColor: true, columns: 80, omni: slow });
    const seen: string[] = [];
    await t.waitFor(
      'the confirmation prompt',
      (s) => {
        const last = rows(s).at(-1) ?? '';
        if (seen.at(-1) !== last) seen.push(last);
        return /^Make these changes\? \[y\/N\] $/m.test(s);
      },
      { timeoutMs: 60_000, history: false },
    );
    const phases = seen.filter((l) => / · \d+s$/.test(l));
    expect(
      phases.some((l) => l.startsWith('checking the key, the provider and its heartbeat · ')),
      seen.join('\n'),
    ).toBe(true);
    expect(
      phases.some((l) => l.startsWith('reading Omni')),
      seen.join('\n'),
    ).toBe(true);
    // The clock moved while it worked: the line was redrawn as the seconds went by.
    expect(new Set(phases.map((l) => / · (\d+)s$/.exec(l)![1])).size, seen.join('\n')).toBeGreaterThanOrEqual(2);
    t.send('Enter');
    const end = await t.waitFor('the end of the run', (s) => EXITED.test(s), { timeoutMs: 30_000 });
    expect(EXITED.exec(end)![1]).toBe('10');
  }, 90_000);

  it('plan with stdout to a file: phases on stderr while it reads, erased after; the file not wrapped', async () => {
    const file = join(dir, 'plan.txt');
    const t = await terminal('plan80', ['plan', '--id', ID], { noColor: true, columns: 80, omni: slow, stdout: file });
    await t.waitFor('a phase on the bottom row', (s) => /^(checking the key|reading Omni)/.test(rows(s).at(-1) ?? ''), {
      timeoutMs: 30_000,
      history: false,
    });
    const end = await t.waitFor('the end of the plan', (s) => EXITED.test(s), { timeoutMs: 60_000 });
    expect(EXITED.exec(end)![1]).toBe('10');
    expect(rows(end).filter((l) => / · \d+s$/.test(l))).toEqual([]);
    const text = await readFile(file, 'utf8');
    const item = text.split('\n').find((l) => l.startsWith(`  - InfraMachine ${machineUuid(0)}: `))!;
    expect(item).toMatch(/→ remove-finalizers InfraMachines$/);
    // No chain continued on a line of its own (the `next:` lines of a section are not continuations).
    expect(text).not.toMatch(/^ {6}(?!next: )\S/m);
  }, 90_000);

  // Last: it writes to the slow Omni, which the tests above only read.
  it('Ctrl-C while it releases: "Interrupted" and "Not started", nothing "Failed"; exit 130', async () => {
    const t = await terminal('ctrlc80', ['--id', ID], { noColor: true, columns: 80, omni: slow });
    await t.waitFor('the confirmation prompt', (s) => /^Make these changes\? \[y\/N\] $/m.test(s), {
      timeoutMs: 60_000,
    });
    t.send('y', 'Enter');
    // Each write takes this Omni 600 ms: the releases are under way for seconds.
    await t.waitFor('the progress line', (s) => PROGRESS.test(rows(s).at(-1) ?? ''), { timeoutMs: 30_000 });
    t.send('C-c');
    const end = await t.waitFor('the end of the run', (s) => EXITED.test(s), { timeoutMs: 30_000 });
    expect(EXITED.exec(end)![1]).toBe('130');
    const summary = end.slice(end.lastIndexOf('Result: '));
    expect(summary).toMatch(/^Result: interrupted/);
    expect(summary).toMatch(
      /^(Interrupted \(under way when|Not started \(the signal came first)[^\n]*; run again\) \(\d+\):$/m,
    );
    expect(summary).not.toMatch(/^Failed \(/m);
    expect(summary).not.toContain('Canceled');
    expect(summary.split('\n').filter((l) => l.length > 80)).toEqual([]);
  }, 120_000);
});
