// What `run` and `plan` leave on every exit, for the tests of their exit codes (test/cli-exits.test.ts
// in this process, test/e2e/cli-exits.test.ts with signals): a sim of provider ID as each case needs
// it, the command lines and environment against it, and the check that a result is on stdout and in
// the --report file alike, with the error's stable code, the logs JSON and the error their last record.

import { expect } from 'vitest';
import { T } from '../../src/omni-api/resource.js';
import { bareMetalMachine, generateScenario, machineUuid } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { cleanEnv } from './cli-process.js';
import { healthStatus } from './provider-fixtures.js';

export const ID = 'bm';

export interface SimOpts {
  machines?: number;
  running?: number;
  registered?: boolean;
  heartbeatAgeMs?: number;
}

/**
 * A sim of provider ID with stuck machines (and running ones, a fresh heartbeat, no registration, latency) as asked,
 * pushed to `sims` for the caller's afterEach to close.
 */
export async function simWith(sims: Sim[], o: SimOpts = {}): Promise<Sim> {
  const sc = generateScenario({ providerId: ID, machines: o.machines ?? 1, omniVersion: '1.3.4' });
  for (let i = 0; i < (o.running ?? 0); i++)
    sc.resources.push(...bareMetalMachine(ID, machineUuid(i, 7), { phase: 'running' }));
  if (o.registered === false) sc.resources = sc.resources.filter((r) => r.metadata.type !== T.InfraProvider);
  if (o.heartbeatAgeMs !== undefined) sc.resources.push(healthStatus(ID, Date.now() - o.heartbeatAgeMs));
  const s = await createSim(sc);
  sims.push(s);
  await s.controllers?.idle();
  return s;
}

const keyOf = (s: Sim) => s.keys[`infra-provider:${ID}`]!;

export interface Outcome {
  code: number | null;
  stdout: Record<string, unknown>;
  report: Record<string, unknown>;
  stderr: string;
}

/** A command's exit code, stdout and stderr, and its --report file's text, as an Outcome: both results parsed. */
export function outcomeOf(
  r: { code: number | null; stdout: string; stderr: string },
  reportText: string,
  file: string,
): Outcome {
  const parse = (text: string, what: string) => {
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new Error(`${what} is not JSON (exit ${r.code}):\n${text}\n--- stderr\n${r.stderr}`);
    }
  };
  return {
    code: r.code,
    stdout: parse(r.stdout, 'stdout'),
    report: parse(reportText, `the report ${file}`),
    stderr: r.stderr,
  };
}

/** The flags withResults adds: the result on stdout and in `file`, JSON logs. */
export const resultFlags = (file: string) => ['--output', 'json', '--report', file, '--log-format', 'json'];

export const runArgs = (s: Sim | string, extra: string[] = []) => [
  '--id',
  ID,
  '--yes',
  '--omni-api-endpoint',
  typeof s === 'string' ? s : s.endpoint,
  ...extra,
];
export const planArgs = (s: Sim | string, extra: string[] = []) => [
  'plan',
  '--id',
  ID,
  '--omni-api-endpoint',
  typeof s === 'string' ? s : s.endpoint,
  ...extra,
];
export const envFor = (s: Sim, extra: NodeJS.ProcessEnv = {}) =>
  cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: keyOf(s), ...extra });

/** A result without its clock (start, end, duration: each run has its own), to compare two runs' results. */
export function untimed(r: unknown): unknown {
  expect(r).toMatchObject({
    startedAt: expect.any(String),
    endedAt: expect.any(String),
    durationMs: expect.any(Number),
  });
  const { startedAt: _s, endedAt: _e, durationMs: _d, ...rest } = r as Record<string, unknown>;
  return rest;
}

export function expectResult(o: Outcome, exit: number, code: string | undefined, message?: RegExp): void {
  expect(o.code, o.stderr).toBe(exit);
  expect(o.report, 'the report file holds what stdout shows').toEqual(o.stdout);
  expect(o.stdout).toMatchObject({ tool: 'stub-provider', exitCode: exit });
  if (code === undefined) {
    expect(o.stdout.error).toBeUndefined();
    return;
  }
  expect(o.stdout.error).toMatchObject({ code, message: expect.any(String) });
  if (message) expect((o.stdout.error as { message: string }).message).toMatch(message);
  // The logs are JSON: the error is their last record, with the code, and every line of stderr parses.
  const lines = o.stderr.split('\n').filter((l) => l !== '');
  for (const l of lines) expect(() => JSON.parse(l) as unknown, l).not.toThrow();
  expect(JSON.parse(lines.at(-1)!)).toMatchObject({
    code,
    exitCode: exit,
    msg: (o.stdout.error as { message: string }).message,
  });
}
