// The handler of run and plan (run-io.ts): whatever ends the work, its result holds when it started and ended and
// how long it took, the same on stdout as in --report (docs/design.md, "Output").

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { FailedResult } from '../../src/commands/result.js';
import { handleResult, withOutputs } from '../../src/commands/run-io.js';
import type { Io, ResultTarget } from '../../src/commands/provider-options.js';
import { UsageError } from '../../src/exit-codes.js';
import type { Report } from '../../src/provider/report/report.js';
import { scratchDirEachTest } from '../helpers/cli-process.js';

const dir = scratchDirEachTest('outputs-');

const io = { stdout: new PassThrough(), stderr: new PassThrough(), stdinIsTTY: false, env: {} } as Io;
const report = { tool: 'stub-provider', result: 'done' } as unknown as Report;

describe('the times of a result', () => {
  const target = (reportFile: string): ResultTarget => ({ output: 'json', reportFile, providerId: 'x', inputs: [] });
  const ioOf = () => {
    const stdout = new PassThrough();
    let text = '';
    stdout.on('data', (d: Buffer) => (text += d.toString()));
    return { io: { ...io, stdout, signals: undefined } as Io, text: () => text };
  };

  it('a report holds when the work started and ended (ISO 8601) and how long it took', async () => {
    const file = join(dir(), 'r.json');
    const before = Date.now();
    const rep = await withOutputs('run', target(file), io, async () => {
      await new Promise((r) => setTimeout(r, 30));
      return { ...report, exitCode: 0 } as Report;
    });
    const written = JSON.parse(readFileSync(file, 'utf8')) as Report;
    for (const r of [rep, written]) {
      expect(r.startedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Date.parse(r.startedAt!)).toBeGreaterThanOrEqual(before - 1);
      expect(Date.parse(r.endedAt!)).toBeGreaterThanOrEqual(Date.parse(r.startedAt!));
      expect(r.durationMs).toBeGreaterThanOrEqual(25);
    }
  });

  it('a failed result has them too, the same on stdout as in --report', async () => {
    const file = join(dir(), 'r.json');
    const { io: out, text } = ioOf();
    await expect(
      handleResult('run', target(file), out, () =>
        withOutputs('run', target(file), out, () => Promise.reject(new UsageError('no'))),
      ),
    ).rejects.toBeInstanceOf(UsageError);
    const written = JSON.parse(readFileSync(file, 'utf8')) as FailedResult;
    expect(written).toMatchObject({ result: 'failed', exitCode: 2, durationMs: expect.any(Number) as number });
    expect(written.startedAt).toBeDefined();
    expect(JSON.parse(text())).toEqual(written);
  });
});
