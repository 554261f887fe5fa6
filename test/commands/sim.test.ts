// `stub-provider sim` refusing what it is given, through the CLI's main() in this process: bad
// --faults and a bad scenario are usage errors naming the key (test/e2e/sim-command.test.ts runs the
// built sim until its signal).

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { runMain } from '../helpers/in-process-cli.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BARE = join(ROOT, 'scenarios/bare-metal-stuck.yaml');

let dir: string;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `stub-provider sim ARGS` that is expected to stop by itself: its exit code and stderr. */
async function exitOf(args: string[]): Promise<{ code: number | null; err: string }> {
  const r = await runMain(['sim', ...args]);
  return { code: r.code, err: r.stderr };
}

describe('stub-provider sim', () => {
  it('bad --faults are a usage error (exit 2) naming the key', async () => {
    const { code, err } = await exitOf([
      '--scenario',
      BARE,
      '--faults',
      '{throttle: {infra_provider: {bytes_per_second: 0, burst: 1}}}',
    ]);
    expect(code).toBe(2);
    expect(err).toContain('--faults.throttle.infra_provider.bytes_per_second: expected a positive integer');
  });

  it('a bad scenario is a usage error (exit 2) naming the document and key', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sim-e2e-'));
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'omni: { version: "1.3" }\n---\nmetadata: { namespace: a, type: b, id: c, phase: nope }\n');
    const { code, err } = await exitOf(['--scenario', bad]);
    expect(code).toBe(2);
    expect(err).toContain('document 1: metadata.phase');
  });
});
