// src/omni-api/bounded-file.ts: input files read within a bound, refused when not regular files.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { describeBytes, InputFileError, readBoundedFile } from '../../src/omni-api/bounded-file.js';
import { exitCodeFor } from '../../src/exit-codes.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function refusal(path: string, maxBytes: number): InputFileError {
  try {
    readBoundedFile(path, { what: '--x', maxBytes });
  } catch (e) {
    expect(e).toBeInstanceOf(InputFileError);
    return e as InputFileError;
  }
  throw new Error('read it');
}

describe('readBoundedFile', () => {
  it('reads a file up to its bound, exactly at it too', () => {
    const d = mkdtempSync(join(tmpdir(), 'bounded-'));
    dirs.push(d);
    writeFileSync(join(d, 'f'), 'x'.repeat(100));
    expect(readBoundedFile(join(d, 'f'), { what: '--x', maxBytes: 100 })).toBe('x'.repeat(100));
    const e = refusal(join(d, 'f'), 99);
    expect(e.code).toBe('STUB_INPUT_TOO_LARGE');
    expect(e.message).toBe(
      `--x ${join(d, 'f')} is larger than 99 bytes, the most it may hold (100 bytes): is it the right file?`,
    );
    expect(exitCodeFor(e)).toBe(2);
  });

  it('a file whose size says 0 but that holds more (/proc): refused once more than the bound came', () => {
    expect(refusal('/proc/self/maps', 16).code).toBe('STUB_INPUT_TOO_LARGE');
  });

  it("a device or a directory: refused before reading; a missing file is the caller's (Node's error)", () => {
    expect(refusal('/dev/urandom', 1024).code).toBe('STUB_INPUT_NOT_A_FILE');
    expect(refusal('/', 1024).message).toMatch(/is a directory, not a regular file/);
    expect(exitCodeFor(refusal('/dev/null', 1024))).toBe(2);
    expect(() => readBoundedFile('/nonexistent/x', { what: '--x', maxBytes: 1 })).toThrow(
      expect.objectContaining({ code: 'ENOENT' }),
    );
  });

  it('says its bounds as a person reads them', () => {
    expect([64 * 1024, 1024 * 1024, 256 * 1024 * 1024, 1000].map(describeBytes)).toEqual([
      '64 KiB',
      '1 MiB',
      '256 MiB',
      '1000 bytes',
    ]);
  });
});
