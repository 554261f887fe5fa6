// Input files read within a bound (docs/design.md rule 12 for what the operator gives as a file: the
// key, --ca-file, a scenario, a dump). What is not a regular file (a FIFO nobody writes, a device
// such as /dev/zero, a directory) is refused before anything is read, and a file larger than its
// bound is refused from its size, or once more than the bound came (a file that grows, a /proc file
// that says 0): never read whole, never waited on. The client and the sim both read files, so it
// lives here, where both may import it; it imports nothing of the project but the error root.

import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { ApiError } from './errors.js';

/** What is refused: `STUB_INPUT_NOT_A_FILE`, `STUB_INPUT_TOO_LARGE` (exit 2: exit-codes.ts). */
export class InputFileError extends ApiError {}

export interface FileBound {
  /** How the file was given, for the message: `--service-account-key-file`, `--ca-file`, `--scenario`. */
  what: string;
  maxBytes: number;
}

/** 64 KiB: a service-account key is about 1.4 KB. */
export const KEY_FILE_MAX_BYTES = 64 * 1024;
/** 1 MiB: a large CA bundle (the system's) is about 220 KB. */
export const CA_FILE_MAX_BYTES = 1024 * 1024;
/** 256 MiB: a scenario or a dump of about 75 000 machines (3.3 KB each); parsing takes several times this. */
export const SCENARIO_FILE_MAX_BYTES = 256 * 1024 * 1024;

/** "64 KiB", "1 MiB": a bound as a person reads it. */
export function describeBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/**
 * The text of `path` (UTF-8), at most `bound.maxBytes` of it. Opening it is not waited on (a FIFO
 * opens at once without a writer, and is refused). Errors of opening (ENOENT, EACCES) are Node's own,
 * for the caller's message; what is not a regular file or is too large is an InputFileError.
 */
export function readBoundedFile(path: string, bound: FileBound): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = fstatSync(fd);
    if (!st.isFile())
      throw new InputFileError(
        'STUB_INPUT_NOT_A_FILE',
        `${bound.what} ${path} is ${kindOf(st)}, not a regular file: give the file itself (nothing was read)`,
      );
    const tooLarge = () =>
      new InputFileError(
        'STUB_INPUT_TOO_LARGE',
        `${bound.what} ${path} is larger than ${describeBytes(bound.maxBytes)}, the most it may hold ` +
          `(${st.size} bytes): is it the right file?`,
      );
    if (st.size > bound.maxBytes) throw tooLarge();
    // One byte more than the bound tells a file that grew past it.
    // Read in place (no chunk copies, no concatenation): the buffer and the text are all it holds.
    let buf = Buffer.allocUnsafe(Math.min(bound.maxBytes, Math.max(st.size, 64 * 1024)) + 1);
    let total = 0;
    for (;;) {
      if (total === buf.length) {
        const grown = Buffer.allocUnsafe(Math.min(bound.maxBytes + 1, buf.length * 2));
        buf.copy(grown, 0, 0, total);
        buf = grown;
      }
      const n = readSync(fd, buf, total, buf.length - total, null);
      if (n === 0) break;
      total += n;
      if (total > bound.maxBytes) throw tooLarge();
    }
    return buf.toString('utf8', 0, total);
  } finally {
    closeSync(fd);
  }
}

function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO (a named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}
