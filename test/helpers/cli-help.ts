// Runs `stub-provider <argv> --help` in-process and returns what it printed.

import { expect, vi } from 'vitest';
import { main } from '../../src/cli.js';

export async function helpOf(argv: string[]): Promise<string> {
  const out: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const write = vi
    .spyOn(process.stdout, 'write')
    .mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
  const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
  try {
    const code = await main([...argv, '--help']);
    expect(code, `stub-provider ${argv.join(' ')} --help`).toBe(0);
  } finally {
    log.mockRestore();
    write.mockRestore();
    exit.mockRestore();
  }
  return out.join('\n');
}
