// The [y/N] confirmation prompt on a terminal in raw mode: an answer, and Ctrl-C.

import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { askYesNo } from '../../src/commands/process-io.js';
import { StubError, exitCodeFor } from '../../src/exit-codes.js';

describe('Ctrl-C at the [y/N] prompt', () => {
  function terminal(): PassThrough & { isTTY: boolean; setRawMode: () => unknown } {
    const input = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => input });
    return input;
  }

  it('is an interruption (exit 130) that says nothing was changed, not an internal error', async () => {
    const input = terminal();
    const asked = askYesNo(input, new PassThrough(), 'Make these changes? [y/N] ');
    input.write('\x03'); // what a terminal in raw mode sends for Ctrl-C
    const err = await asked.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StubError);
    expect(err).toMatchObject({
      code: 'STUB_INTERRUPTED',
      message: 'interrupted at the confirmation prompt; nothing was changed',
    });
    expect(exitCodeFor(err)).toBe(130);
  });

  it('still reads an answer', async () => {
    const input = terminal();
    const asked = askYesNo(input, new PassThrough(), '? ');
    input.write('y\r');
    await expect(asked).resolves.toBe(true);
  });
});
