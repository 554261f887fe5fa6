// `stub-provider demo` refusing its flags, through the CLI's main() in this process (the demo itself,
// as a user runs it from a clean clone: test/e2e/demo.test.ts).

import { describe, expect, it } from 'vitest';
import { runMain } from '../../helpers/in-process-cli.js';

function demo(args: string[]) {
  return runMain(['demo', ...args], { env: { ...process.env, NO_COLOR: '1' } });
}

describe('stub-provider demo', () => {
  it('refuses a malformed --omni-version with exit 2', async () => {
    const r = await demo(['--omni-version', 'banana']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--omni-version/);
  }, 20_000);
});
