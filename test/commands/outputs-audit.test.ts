// Outputs are opened before the first call to Omni, through the CLI's main() in this process against
// a simulated Omni in it (so that the test sees what the sim applied): a path that cannot be written,
// two outputs that are one file, a duration a timer cannot hold: exit 2, nothing written; plan
// --report and run --report write the report, the audit log beside it holding every write. What a
// SIGTERM in the middle of a run leaves in the audit log: test/e2e/outputs-audit.test.ts.

import { readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Sim } from '../../src/omni-sim/index.js';
import type { AuditEntry } from '../../src/provider/report/audit.js';
import type { Report } from '../../src/provider/report/report.js';
import { scratchDirEachTest } from '../helpers/cli-process.js';
import { runMain } from '../helpers/in-process-cli.js';
import { env, ID, recordingSim as recordingSimOf, versions, type Applied } from '../helpers/recording-sim.js';
import { simEachTest } from '../helpers/sim-client.js';

const omni = simEachTest();
let applied: Applied[] = [];
const dir = scratchDirEachTest('outputs-audit-');
beforeEach(() => {
  applied = [];
});

const recordingSim = async (machines: number) => omni.closing(await recordingSimOf(applied, machines));

/** `stub-provider ARGS --omni-api-endpoint` the sim, in this process: its exit code, stdout and stderr. */
function stub(s: Sim, args: string[]) {
  const r = runMain([...args, '--omni-api-endpoint', s.endpoint], { env: env(s) });
  let out = '';
  let err = '';
  const code = r.then((x) => {
    out = x.stdout;
    err = x.stderr;
    return x.code;
  });
  return { code, stdout: () => out, stderr: () => err };
}

describe('outputs first: exit 2 before anything is asked of Omni', () => {
  it('missing report folder, audit log there, a file twice (path, symlink), plan --report, huge duration', async () => {
    const s = await recordingSim(2);
    const before = versions(s);
    const audit = join(dir(), 'audit.ndjson');
    await writeFile(audit, '{"an":"earlier run"}\n');
    await symlink(audit, join(dir(), 'report-link.json'));
    const base = ['--id', ID, '--yes', '--log-format', 'json'];
    const cases: [string[], RegExp][] = [
      [
        [...base, '--report', join(dir(), 'missing', 'report.json')],
        new RegExp(
          String.raw`--report .*missing\/report\.json: cannot open it for writing \(ENOENT: its folder ` +
            String.raw`does not exist\); nothing was written to Omni`,
        ),
      ],
      [[...base, '--audit-log', join(dir(), 'missing', 'audit.ndjson')], /--audit-log .*ENOENT/],
      [
        [...base, '--report', audit, '--audit-log', audit],
        /are the same file: the report would overwrite the audit log/,
      ],
      [[...base, '--report', join(dir(), 'report-link.json'), '--audit-log', audit], /are the same file/],
      [['plan', '--id', ID, '--report', join(dir(), 'missing', 'plan.json')], /--report .*ENOENT/],
      [
        [...base, '--step-timeout', '1000h'],
        /--step-timeout 1000h is longer than a timer can wait: at most 2147483647 ms \(596h/,
      ],
      [[...base, '--wait', '--timeout', '1000h'], /--timeout 1000h is longer than a timer can wait/],
    ];
    for (const [args, message] of cases) {
      const r = stub(s, args);
      expect(await r.code, `${args.join(' ')}: ${r.stderr()}`).toBe(2);
      expect(r.stderr()).toMatch(message);
    }
    await s.controllers?.idle();
    expect(applied).toEqual([]);
    expect(versions(s)).toEqual(before);
    expect(await readFile(audit, 'utf8')).toBe('{"an":"earlier run"}\n');
  }, 60_000);

  it('plan --report and run --report write the report file, the audit log beside it', async () => {
    const s = await recordingSim(2);
    const plan = stub(s, [
      'plan',
      '--id',
      ID,
      '--output',
      'json',
      '--log-format',
      'json',
      '--report',
      join(dir(), 'plan.json'),
    ]);
    // Exit 10: changes pending (plan predicts run's work).
    expect(await plan.code, plan.stderr()).toBe(10);
    expect(JSON.parse(await readFile(join(dir(), 'plan.json'), 'utf8'))).toEqual(JSON.parse(plan.stdout()));
    const run = stub(s, [
      '--id',
      ID,
      '--yes',
      '--output',
      'json',
      '--log-format',
      'json',
      '--report',
      join(dir(), 'run.json'),
      '--audit-log',
      join(dir(), 'audit.ndjson'),
    ]);
    expect(await run.code, run.stderr()).toBe(0);
    const rep = JSON.parse(await readFile(join(dir(), 'run.json'), 'utf8')) as Report;
    expect(rep).toMatchObject({ result: 'done', exitCode: 0 });
    const lines = (await readFile(join(dir(), 'audit.ndjson'), 'utf8'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as AuditEntry);
    expect(lines.filter((l) => l.event === 'intent')).toHaveLength(applied.length);
    expect(Object.values(rep.writes).reduce((a, b) => a + b, 0)).toBe(applied.length);
  }, 60_000);
});
