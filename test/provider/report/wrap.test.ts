// wrapText: the summary on a terminal, wrapped between words at its width.

import { describe, expect, it } from 'vitest';
import { wrapText } from '../../../src/provider/report/wrap.js';

describe('wrapText', () => {
  it('breaks between words, continues a list item under its text and an indented line under its indentation', () => {
    const text =
      '  - MachineRequest req-1: being deleted and held by a finalizer\n      next: run again later please\n';
    expect(wrapText(text, 30)).toBe(
      '  - MachineRequest req-1:\n    being deleted and held by\n    a finalizer\n' +
        '      next: run again later\n      please\n',
    );
  });

  it('keeps a word longer than the row whole, on a row of its own; leaves a line that fits as it is', () => {
    const path = 'infra-provider/MachineRequestStatuses.omni.sidero.dev/workers-7x2kq';
    expect(wrapText(`Blocked by ${path} for now`, 40).split('\n')).toEqual(['Blocked by', path, 'for now']);
    expect(wrapText('short line', 40)).toBe('short line');
  });

  it('counts terminal columns: a wide character takes two', () => {
    // 25 columns, 13 characters.
    expect(wrapText('機械機械機械 機械機械機械', 25).split('\n')).toEqual(['機械機械機械 機械機械機械']);
    expect(wrapText('機械機械機械 機械機械機械', 24).split('\n')).toEqual(['機械機械機械', '機械機械機械']);
  });
});
