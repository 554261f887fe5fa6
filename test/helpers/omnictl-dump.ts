// A dump as `omnictl get -o yaml` makes it, from the shipped example scenarios/bare-metal-stuck.omnictl.yaml:
// its documents, some left out, in a file of the test's.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const OMNICTL_EXAMPLE = join(ROOT, 'scenarios/bare-metal-stuck.omnictl.yaml');
/** The stuck machine of that example. */
export const UUID = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';

/** The documents of the shipped omnictl example, filtered: what `omnictl get` calls would have printed. */
export async function dumpWithout(dir: string, drop: (doc: string) => boolean, name: string): Promise<string> {
  const docs = (await readFile(OMNICTL_EXAMPLE, 'utf8')).split(/^---$/m);
  const file = join(dir, name);
  await writeFile(file, docs.filter((d) => !drop(d)).join('---\n'));
  return file;
}

/** What omnictl can dump: nothing of the provider's own namespace (no resource definitions there). */
export const realDump = (dir: string) =>
  dumpWithout(dir, (d) => d.includes('namespace: infra-provider:bare-metal'), 'omni-dump.yaml');
