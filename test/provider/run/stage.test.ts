// The stage tracker (src/provider/run/stage.ts) and the `stage` of every result: how far a command got.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StageTracker, STAGES } from '../../../src/provider/run/stage.js';
import type { Stage, StageEvent } from '../../../src/provider/run/stage.js';
import { reconcile } from '../../../src/provider/run/reconcile.js';
import { silentLogger } from '../../../src/log.js';
import type { Sim } from '../../../src/omni-sim/index.js';
import { FakeState } from '../../helpers/fake-state.js';
import { bareMetalMachine, providerStatus, reconcileOptions } from '../../helpers/provider-fixtures.js';
import { planIn, providerSim, runIn } from '../../helpers/cli-config.js';

const ID = 'bare-metal';
const U1 = '11111111-1111-1111-1111-111111111111';

const sims: Sim[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('StageTracker', () => {
  it('starts at starting, tells listeners each stage entered and each detail, and survives a throwing listener', () => {
    let t = 0;
    const tracker = new StageTracker(() => t);
    expect(tracker.current).toBe('starting');
    const seen: StageEvent[] = [];
    tracker.subscribe(() => {
      throw new Error('a broken display');
    });
    const off = tracker.subscribe((e) => seen.push(e));
    t = 5;
    tracker.enter('reading');
    t = 7;
    tracker.enter('reading', { kind: 'InfraMachines.omni.sidero.dev', count: 3 });
    off();
    tracker.enter('planning');
    expect(seen).toEqual([
      { stage: 'reading', detail: {}, entered: true, sinceMs: 5 },
      { stage: 'reading', detail: { kind: 'InfraMachines.omni.sidero.dev', count: 3 }, entered: false, sinceMs: 5 },
    ]);
    expect(tracker.current).toBe('planning');
    expect(tracker.sinceMs).toBe(7);
  });
});

describe('the stages of a run', () => {
  it('a whole-provider run goes through them in order and ends at done', async () => {
    const fake = new FakeState([providerStatus(ID, true), ...bareMetalMachine(ID, U1)]);
    const stages: Stage[] = [];
    const kinds: string[] = [];
    await reconcile(
      {
        state: fake,
        logger: silentLogger(),
        version: '0.1.0',
        stage: (s, d) => {
          if (d?.kind) kinds.push(d.kind);
          if (stages.at(-1) !== s) stages.push(s);
        },
      },
      reconcileOptions(ID, {}),
    );
    for (const s of stages) expect(STAGES).toContain(s);
    // Pass 1 releases the machine and waits for Omni to destroy it; pass 2 deregisters; then --settle.
    expect(stages.join(' ')).toBe(
      'reading planning announcing releasing waiting reading planning releasing deregistering settling done',
    );
    expect(kinds).toContain('InfraMachines.omni.sidero.dev');
  });

  it('the result of run and plan says done; a refused preflight says preflight in --report', async () => {
    const s = await providerSim('1.9.3', [providerStatus(ID, true), ...bareMetalMachine(ID, U1)], {
      ids: [ID, 'other'],
    });
    sims.push(s);
    expect((await planIn(s, ID)).stage).toBe('done');
    expect((await runIn(s, ID)).stage).toBe('done');

    const dir = mkdtempSync(join(tmpdir(), 'stage-'));
    dirs.push(dir);
    const report = join(dir, 'report.json');
    // A key of another provider than --id: refused by the preflight before any write.
    await expect(runIn(s, 'other', ['--id', ID, '--report', report])).rejects.toThrow();
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({ result: 'failed', stage: 'preflight' });
  });
});
