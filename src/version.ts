import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The package's own folder and version: package.json next to dist/ (dist/src/version.js) or src/
 * (src/version.ts, under vitest). The folder holds what ships beside the code (scenarios/).
 */
const PACKAGE = (() => {
  for (const rel of ['../', '../../']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(`${rel}package.json`, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'stub-provider' && pkg.version)
        return { root: fileURLToPath(new URL(rel, import.meta.url)), version: pkg.version };
    } catch {
      // try the next candidate
    }
  }
  return undefined;
})();

/** The package version, read from package.json next to dist/ or src/. */
export const VERSION: string = PACKAGE?.version ?? '0.0.0';

/** The package's folder (ends with a slash), when its package.json was found. */
export const PACKAGE_ROOT: string | undefined = PACKAGE?.root;
