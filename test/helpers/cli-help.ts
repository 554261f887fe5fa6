// Runs `stub-provider <argv> --help` in-process and returns what it printed.

import { expect } from 'vitest';
import { runMain } from './in-process-cli.js';

export async function helpOf(argv: string[]): Promise<string> {
  const r = await runMain([...argv, '--help']);
  expect(r.code, `stub-provider ${argv.join(' ')} --help`).toBe(0);
  expect(r.stderr).toBe('');
  return r.stdout;
}
