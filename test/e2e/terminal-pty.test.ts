// Issue 14 item 8: the built CLI on a real pseudo-terminal (tmux, 160x50), against `stub-provider
// sim`, read back as a person sees it (capture-pane): the confirmation prompt, the declined path
// (Enter: nothing changed, no last step), and a --wait run with NO_COLOR: one short line per
// machine, one progress line at the bottom redrawn in place (not hundreds), no colour at all, and
// after the timeout no last step either.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
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
const PROGRESS =
  /^stub-provider: \d+ released, \d+ refused, \d+ blocked, \d+ failed · \d+ running, \d+ waiting, \d+ remaining · /;
const EXITED = /^\[exit (\d+)\]$/m;

let dir: string;
let sim: SimProcess;
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
}, 30_000);

afterAll(async () => {
  for (const t of terminals.splice(0)) t.close();
  await sim?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * A terminal running the CLI with `args` in a clean environment (the key and endpoint only, and
 * NO_COLOR when asked), then `[exit N]`, then nothing, so that the screen can be read at leisure.
 */
async function terminal(name: string, args: string[], o: { noColor: boolean }): Promise<TmuxTerminal> {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const env = [
    `PATH=${q(process.env.PATH ?? '/usr/bin:/bin')}`,
    'TERM="$TERM"',
    `OMNI_ENDPOINT=${q(sim.endpoint)}`,
    `OMNI_SERVICE_ACCOUNT_KEY=${q(sim.keys[`infra-provider:${ID}`]!)}`,
    ...(o.noColor ? ['NO_COLOR=1'] : []),
  ];
  const script = join(dir, `${name}.sh`);
  await writeFile(
    script,
    `env -i ${env.join(' ')} ${q(process.execPath)} ${q(MAIN)} ${args.map(q).join(' ')}\necho "[exit $?]"\nexec ` +
      `sleep 600\n`,
  );
  await chmod(script, 0o700);
  const t = new TmuxTerminal(join(dir, `${name}.sock`), name);
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

  it(`NO_COLOR, y, --wait: one line per machine, one progress line at the bottom redrawn in place, no colour, no last \
step after the timeout`, async () => {
    const t = await terminal('wait', ['--id', ID, '--wait', '--timeout', '8s'], { noColor: true });
    await t.waitFor('the confirmation prompt', (s) => /^Make these changes and keep watching\? \[y\/N\] $/m.test(s));
    t.send('y', 'Enter');
    // The stuck machines are released; the running ones keep --wait waiting, the clock on the line moving.
    const waiting = new RegExp(
      `^stub-provider: ${STUCK} released, 0 refused, 0 blocked, 0 failed · ${RUNNING} running, 0 waiting, 0 ` +
        `remaining · \\d+s elapsed, \\d+s left$`,
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
