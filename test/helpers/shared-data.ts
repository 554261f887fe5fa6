// Where the team's shared data lives: recordings of real Omni answers and golden vectors. It is read
// from there, never copied into the repository (it is refreshed there): `../shared` beside the
// checkout, or STUB_TEST_SHARED_DIR (not a STUB_PROVIDER_* name: the CLI reads those as flags). A
// missing folder fails the test that needs it, loudly.

import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The shared folder, or an error that says where it was looked for. */
export function sharedDir(): string {
  const fromEnv = process.env['STUB_TEST_SHARED_DIR'];
  const dir = fromEnv !== undefined && fromEnv !== '' ? resolve(fromEnv) : resolve(REPO, '..', 'shared');
  if (!existsSync(dir)) {
    throw new Error(
      `the shared data folder ${dir} does not exist: check out the team's shared/ beside the repository, or set ` +
        `STUB_TEST_SHARED_DIR`,
    );
  }
  return dir;
}

/** A path inside the shared folder; an error when that file or folder is not there. */
export function sharedPath(...parts: string[]): string {
  const p = join(sharedDir(), ...parts);
  if (!existsSync(p)) throw new Error(`${p} is missing from the shared data folder`);
  return p;
}
