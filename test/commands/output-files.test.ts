// --report and --audit-log are opened, and checked to be different files, before anything is asked of Omni;
// what cannot be written is a usage error (docs/design.md, "Output").

import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openOutputs } from '../../src/commands/output-files.js';
import type { Io } from '../../src/commands/provider-options.js';
import { UsageError } from '../../src/exit-codes.js';
import type { Report } from '../../src/provider/report/report.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'outputs-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const io = { stdout: new PassThrough(), stderr: new PassThrough(), stdinIsTTY: false, env: {} } as Io;
const report = { tool: 'stub-provider', result: 'done' } as unknown as Report;

function refusal(o: Parameters<typeof openOutputs>[0]): UsageError {
  try {
    openOutputs(o).close();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return e as UsageError;
  }
  throw new Error('openOutputs accepted it');
}

describe('openOutputs', () => {
  it('a report or audit log in a missing folder, or that is a folder: exit 2 naming the flag and path', () => {
    expect(refusal({ report: join(dir, 'missing', 'r.json') }).message).toMatch(
      new RegExp(
        String.raw`--report .*missing\/r\.json: cannot open it for writing \(ENOENT: its folder does ` +
          String.raw`not exist\); nothing was written to Omni`,
      ),
    );
    expect(refusal({ auditLog: join(dir, 'missing', 'a.ndjson') }).message).toMatch(/--audit-log .*ENOENT/);
    mkdirSync(join(dir, 'sub'));
    expect(refusal({ report: join(dir, 'sub') }).message).toMatch(/EISDIR: it is a folder/);
  });

  it('the same file twice (same path, a symlink, a hard link) is refused and the audit log keeps what it held', () => {
    const audit = join(dir, 'audit.ndjson');
    writeFileSync(audit, '{"earlier":"run"}\n');
    symlinkSync(audit, join(dir, 'link.json'));
    linkSync(audit, join(dir, 'hard.json'));
    for (const report of [audit, join(dir, 'link.json'), join(dir, 'hard.json'), join(dir, '.', 'audit.ndjson')]) {
      expect(refusal({ report, auditLog: audit }).message).toMatch(
        /are the same file: the report would overwrite the audit log/,
      );
    }
    expect(readFileSync(audit, 'utf8')).toBe('{"earlier":"run"}\n');
  });

  it('an output that is the key file is refused, the key untouched', () => {
    const key = join(dir, 'key.txt');
    writeFileSync(key, 'c2VjcmV0');
    expect(refusal({ report: key, inputs: [{ flag: '--service-account-key-file', path: key }] }).message).toMatch(
      /--report .* is the file of --service-account-key-file/,
    );
    expect(refusal({ auditLog: key, inputs: [{ flag: '--service-account-key-file', path: key }] }).message).toMatch(
      /--audit-log/,
    );
    expect(readFileSync(key, 'utf8')).toBe('c2VjcmV0');
  });

  it('opens both, appends to the audit log, and replaces what the report file held', () => {
    const audit = join(dir, 'audit.ndjson');
    const rep = join(dir, 'report.json');
    writeFileSync(audit, 'old line\n');
    writeFileSync(rep, 'x'.repeat(10_000));
    const out = openOutputs({ report: rep, auditLog: audit, inputs: [{ flag: '--ca-file', path: undefined }] });
    // Empty from the start: a run that fails leaves no stale report behind.
    expect(readFileSync(rep, 'utf8')).toBe('');
    out.auditSink!('new line\n');
    out.writeReport(report, io);
    out.close();
    expect(readFileSync(audit, 'utf8')).toBe('old line\nnew line\n');
    expect(JSON.parse(readFileSync(rep, 'utf8'))).toEqual(report);
  });

  it('without outputs: nothing to open, nothing written', () => {
    const out = openOutputs({});
    expect(out.auditSink).toBeUndefined();
    out.writeReport(report, io);
    out.close();
  });
});
