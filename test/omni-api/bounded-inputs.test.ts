// Bounded inputs (src/omni-api/bounded-file.ts) through the CLI's main() in this process: the key
// file, --ca-file, a scenario and a dump are refused before anything is read when they are not
// regular files (a FIFO nobody writes, /dev/zero, a directory: exit 2 at once, where a FIFO hung and
// /dev/zero grew without bound), and read within a bound named in the message (the key: 64 KiB; a
// 100 MB key file exits 2 with a small peak RSS: test/e2e/bounded-inputs.test.ts).

import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { cleanEnv, errorLine, scratchDirEachTest, sparseFile } from '../helpers/cli-process.js';
import { simForFile } from '../helpers/sim-client.js';
import { runMain } from '../helpers/in-process-cli.js';

const dir = scratchDirEachTest('bounded-');
const sim = simForFile(generateScenario({ providerId: 'bm', machines: 1, omniVersion: '1.9.3' }));

/** What is not a regular file: a FIFO nobody writes, a device that never ends, a directory. */
function notFiles(): [string, string, RegExp][] {
  const fifo = join(dir(), 'fifo');
  execFileSync('mkfifo', [fifo]);
  const folder = join(dir(), 'folder');
  mkdirSync(folder);
  return [
    ['a FIFO', fifo, /is a FIFO \(a named pipe\), not a regular file/],
    ['/dev/zero', '/dev/zero', /is a character device, not a regular file/],
    ['a directory', folder, /is a directory, not a regular file/],
  ];
}

const keyEnv = () => cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: sim().keys['infra-provider:bm'] });

/** How each input is given, with what the command needs besides. */
const INPUTS: {
  what: string;
  args: (path: string) => string[];
  env: () => NodeJS.ProcessEnv;
  bound: string;
  /** scenario-file.ts names a directory before it is opened. */
  directory?: RegExp;
}[] = [
  {
    what: '--service-account-key-file',
    args: (p) => [
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
    env: () => cleanEnv(),
    bound: '64 KiB',
  },
  {
    what: '--ca-file',
    args: (p) => ['plan', '--id', 'bm', '--omni-api-endpoint', sim().endpoint, '--ca-file', p, '--output', 'json'],
    env: keyEnv,
    bound: '1 MiB',
  },
  {
    what: '--scenario',
    args: (p) => ['sim', '--scenario', p],
    env: () => cleanEnv(),
    bound: '256 MiB',
    directory: /is a folder: give a YAML file \[STUB_USAGE\]/,
  },
  {
    what: '--from-dump',
    args: (p) => ['plan', '--id', 'bm', '--from-dump', p, '--output', 'json'],
    env: () => cleanEnv(),
    bound: '256 MiB',
    directory: /is a folder: give a YAML file \[STUB_USAGE\]/,
  },
];

describe('input files', () => {
  it.each(INPUTS.map((i) => [i.what, i] as const))(
    '%s: a FIFO, /dev/zero, a directory: exit 2 at once, naming what it is',
    async (_what, input) => {
      for (const [kind, path, message] of notFiles()) {
        const r = await runMain(input.args(path), { env: input.env() });
        expect(r.code, `${path}: ${r.stderr}`).toBe(2);
        if (kind === 'a directory' && input.directory) {
          expect(errorLine(r.stderr)).toMatch(input.directory);
          continue;
        }
        expect(errorLine(r.stderr)).toMatch(message);
        expect(errorLine(r.stderr)).toMatch(/\[STUB_INPUT_NOT_A_FILE\]/);
      }
    },
  );

  it.each(INPUTS.map((i) => [i.what, i] as const))(
    '%s: larger than its bound: exit 2 naming the bound',
    async (_what, input) => {
      // Just past the bound; the key's 100 MB case below measures the memory.
      const bytes = { '64 KiB': 64 * 1024, '1 MiB': 1024 * 1024, '256 MiB': 256 * 1024 * 1024 }[input.bound]! + 1;
      const path = sparseFile(join(dir(), 'big'), bytes);
      const r = await runMain(input.args(path), { env: input.env() });
      expect(r.code, r.stderr).toBe(2);
      expect(errorLine(r.stderr)).toContain(`is larger than ${input.bound}, the most it may hold (${bytes} bytes)`);
      expect(errorLine(r.stderr)).toMatch(/\[STUB_INPUT_TOO_LARGE\]/);
    },
  );
});
