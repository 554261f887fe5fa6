// The example scenarios that ship in the package (scenarios/), by name: `sim --scenario
// bare-metal-stuck` and `plan --from-dump bare-metal-stuck.omnictl` work from an npm install, where
// no scenarios/ folder sits in the operator's current directory.

import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from '../exit-codes.js';
import { PACKAGE_ROOT } from '../version.js';

/** The folder of the shipped examples, when the package's folder was found. */
export const SCENARIOS_DIR: string | undefined = PACKAGE_ROOT ? path.join(PACKAGE_ROOT, 'scenarios') : undefined;

const EXT = '.yaml';

/** The names of the shipped examples (file names without `.yaml`), sorted. */
export function shippedScenarios(): string[] {
  if (!SCENARIOS_DIR || !existsSync(SCENARIOS_DIR)) return [];
  return readdirSync(SCENARIOS_DIR)
    .filter((f) => f.endsWith(EXT))
    .map((f) => f.slice(0, -EXT.length))
    .sort();
}

/**
 * The file a `--scenario` (or `--from-dump`) value names: the path itself when it exists; else, for a
 * bare name or a `scenarios/<name>` path (the README's form), the shipped example of that name, with
 * or without `.yaml`. Anything else is a usage error listing the examples.
 */
export function resolveScenarioFile(value: string, flag: string): string {
  if (existsSync(value)) {
    if (statSync(value).isDirectory()) throw new UsageError(`${flag} ${value} is a folder: give a YAML file`);
    return value;
  }
  const dir = path.dirname(value);
  if (SCENARIOS_DIR && (dir === '.' || dir === 'scenarios')) {
    const base = path.basename(value);
    for (const name of [base, `${base}${EXT}`]) {
      const shipped = path.join(SCENARIOS_DIR, name);
      if (name.endsWith(EXT) && existsSync(shipped)) return shipped;
    }
  }
  const examples = shippedScenarios();
  throw new UsageError(
    `${flag} ${value}: no such ` +
      `file${
        examples.length > 0
          ? `, and no example of that name ships with stub-provider (examples: ` +
            `${examples.join(', ')}; for instance ${flag} ${examples[0]})`
          : ''
      }`,
  );
}
