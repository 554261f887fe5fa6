// Bounded inputs (src/omni-api/bounded-file.ts) as the built CLI's memory shows them: a 100 MB key
// file exits 2 at once with a small peak RSS (the process's own, read at its exit). The refusals of
// what is not a regular file or is larger than its bound: test/omni-api/bounded-inputs.test.ts.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import {
  cleanEnv,
  errorLine,
  requireBuiltCli,
  runCli,
  scratchDirEachTest,
  sparseFile,
} from '../helpers/cli-process.js';
import { simForFile } from '../helpers/sim-client.js';

requireBuiltCli();
const dir = scratchDirEachTest('bounded-');
const sim = simForFile(generateScenario({ providerId: 'bm', machines: 1, omniVersion: '1.9.3' }));

/** The key file given as --service-account-key-file to a plan. */
const INPUTS = [
  {
    args: (p: string) => [
      'plan',
      '--id',
      'bm',
      '--omni-api-endpoint',
      sim().endpoint,
      '--service-account-key-file',
      p,
      '--output',
      'json',
    ],
  },
];

describe('input files', () => {
  it('a 100 MB key file: exit 2 at once, with a peak RSS under 100 MB', async () => {
    const path = sparseFile(join(dir(), 'key-100mb'), 100 * 1000 * 1000);
    const usage = join(dir(), 'usage.json');
    const hook = join(dir(), 'rss.mjs');
    writeFileSync(
      hook,
      "import { writeFileSync } from 'node:fs';\n" +
        `process.on('exit', () => writeFileSync(${JSON.stringify(usage)}, String(process.resourceUsage().maxRSS)));\n`,
    );
    const r = await runCli(INPUTS[0]!.args(path), { env: cleanEnv({ NODE_OPTIONS: `--import ${hook}` }) });
    expect(r.code, r.stderr).toBe(2);
    expect(errorLine(r.stderr)).toContain('is larger than 64 KiB');
    const peakMb = Number(readFileSync(usage, 'utf8')) / 1024;
    expect(peakMb).toBeLessThan(100);
  });
});
