// ndjsonLines (src/omni-client/transport/body.ts) counts a line's bytes while they arrive, whatever the
// chunking, refuses invalid UTF-8 even when a chunk boundary splits it, and holds nothing of the
// read budget once a line is handed out.

import { describe, expect, it } from 'vitest';
import { ReadBudget } from '../../../src/omni-client/transport/body.js';
import { ndjsonLines } from '../../../src/omni-client/transport/ndjson.js';
import { WireError } from '../../../src/omni-api/wire.js';

async function* chunks(parts: Buffer[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield p;
}

async function lines(parts: Buffer[], maxLineBytes: number, budget?: ReadBudget): Promise<string[]> {
  const out: string[] = [];
  for await (const l of ndjsonLines(chunks(parts), { maxLineBytes, ...(budget ? { budget } : {}) })) out.push(l);
  return out;
}

/** Every way to cut `b` into two chunks. */
function cuts(b: Buffer): Buffer[][] {
  return Array.from({ length: b.length + 1 }, (_, i) => [b.subarray(0, i), b.subarray(i)]);
}

describe('ndjsonLines limits', () => {
  it('a line of exactly the limit passes, a byte more is STUB_LINE_TOO_LONG, wherever the chunks are cut', async () => {
    const ok = Buffer.from(`{"a":"${'x'.repeat(10)}"}\n{}\n`);
    const tooLong = Buffer.from(`{}\n{"a":"${'x'.repeat(11)}"}\n`);
    for (const parts of cuts(ok)) expect(await lines(parts, 18)).toEqual([`{"a":"${'x'.repeat(10)}"}`, '{}']);
    for (const parts of cuts(tooLong)) {
      await expect(lines(parts, 18)).rejects.toMatchObject({ code: 'STUB_LINE_TOO_LONG' });
    }
    // A last line without a newline counts as much.
    await expect(lines([Buffer.from(`{"a":"${'x'.repeat(11)}"}`)], 18)).rejects.toBeInstanceOf(WireError);
  });

  it('invalid UTF-8 is refused, also when a chunk boundary splits it; a split valid character is not', async () => {
    const bad = Buffer.concat([Buffer.from('{"id":"a'), Buffer.from([0xe2, 0x82]), Buffer.from('"}\n')]);
    for (const parts of cuts(bad)) await expect(lines(parts, 1024)).rejects.toThrow(/not valid UTF-8/);
    const euro = Buffer.from('{"id":"€"}\n');
    for (const parts of cuts(euro)) expect(await lines(parts, 1024)).toEqual(['{"id":"€"}']);
  });

  it('holds the bytes of an incomplete line against the budget, and nothing once lines are handed out', async () => {
    const budget = new ReadBudget(10);
    await expect(
      lines([Buffer.from('{"a":'), Buffer.from('"0123456789"'), Buffer.from('}\n')], 1024, budget),
    ).rejects.toMatchObject({ code: 'STUB_ANSWER_TOO_LARGE' });
    expect(budget.held).toBe(0);
    const big = new ReadBudget(1024);
    const it = ndjsonLines(chunks([Buffer.from('{"a":'), Buffer.from('1}\n{"b":'), Buffer.from('2}\n{"c"')]), {
      budget: big,
    });
    for await (const l of it) {
      expect(big.held).toBe(0);
      if (l === '{"b":2}') break;
    }
    expect(big.held).toBe(0);
  });
});
