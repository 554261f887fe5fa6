// What a Kubernetes Job's log holds (the built CLI, stdin and stdout not terminals, JSON logs): one
// info line per machine and a few per run, never one per write (those are debug and in --audit-log),
// pino's level names and ISO 8601 times, and the result as one JSON object on the last line of
// stdout (`kubectl logs job/x | tail -1 | jq`); the report and the text summary say how long it took.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import type { Report } from '../../src/provider/report/report.js';
import { cleanEnv, requireBuiltCli, runCli, scratchDirEachTest } from '../helpers/cli-process.js';

const ID = 'bare-metal';
const MACHINES = 50;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

requireBuiltCli();
const dir = scratchDirEachTest('job-output-');
const sims: Sim[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

async function sim(): Promise<Sim> {
  const s = await createSim(generateScenario({ providerId: ID, machines: MACHINES, omniVersion: '1.3.4' }));
  sims.push(s);
  await s.controllers?.idle();
  return s;
}

describe('a run as a Job runs it', () => {
  it(`${MACHINES} machines: a line per machine, level names, ISO times; the result is stdout's last line`, async () => {
    const s = await sim();
    const audit = join(dir(), 'audit.ndjson');
    const report = join(dir(), 'report.json');
    const r = await runCli(['--id', ID, '--yes', '--output', 'json', '--audit-log', audit, '--report', report], {
      env: cleanEnv({ OMNI_ENDPOINT: s.endpoint, OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`]! }),
      limitMs: 120_000,
    });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stderr
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: unknown; time: unknown; msg: string; kind?: string; stage?: string });
    for (const l of lines) {
      expect(l.level).toBe('info');
      expect(l.time).toMatch(ISO);
    }
    // One per machine, and a handful for the run (preflight, phases, deregistration, ...); no write.
    expect(lines.filter((l) => l.msg === 'released' && l.kind === 'InfraMachine')).toHaveLength(MACHINES);
    expect(lines.length).toBeLessThan(MACHINES + 30);
    expect(lines.filter((l) => /^(updated|destroyed|created)$/.test(l.msg))).toEqual([]);
    // What it is doing: one line as it enters each phase (a terminal has the progress line instead).
    const phases = lines.filter((l) => l.stage !== undefined).map((l) => l.stage);
    expect(phases.slice(0, 3)).toEqual(['preflight', 'reading', 'planning']);
    expect(phases).toContain('releasing');
    expect(phases).toContain('deregistering');
    expect(phases.filter((p, i) => p === phases[i - 1])).toEqual([]);
    // Every write is still in the audit log: an intent and an outcome each.
    expect(readFileSync(audit, 'utf8').trimEnd().split('\n').length).toBeGreaterThan(MACHINES * 6);

    expect(r.stdout.endsWith('\n')).toBe(true);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
    const result = JSON.parse(r.stdout) as Report;
    expect(result).toMatchObject({ result: 'done', exitCode: 0 });
    expect(result.startedAt).toMatch(ISO);
    expect(result.endedAt).toMatch(ISO);
    expect(Date.parse(result.endedAt!)).toBeGreaterThanOrEqual(Date.parse(result.startedAt!));
    expect(result.durationMs).toBeGreaterThan(0);
    // The report file is the same result (printed for a person to read).
    expect(JSON.parse(readFileSync(report, 'utf8'))).toEqual(result);
  }, 150_000);

  it('the text summary says how long it took', async () => {
    const s = await sim();
    const r = await runCli(['--id', ID, '--yes', '--log-level', 'warn'], {
      env: cleanEnv({ OMNI_ENDPOINT: s.endpoint, OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`]! }),
      limitMs: 120_000,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Result: done/m);
    expect(r.stdout).toMatch(/^Took \d+(\.\d)? (ms|s|min)\.$/m);
  }, 150_000);
});
