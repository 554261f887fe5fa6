// `npm run test:quick`: the inner loop. Unit and integration tests without the Go and Python peers
// (their tests are named *.peer.test.ts, and no globalSetup builds the peers) and without test/e2e
// (the packed tarball, the image, the built CLI as a person runs it). `npm test` runs everything.

import { configDefaults, defineConfig } from 'vitest/config';
import { shared } from './vitest.config.js';

export default defineConfig({
  test: {
    ...shared,
    exclude: [...configDefaults.exclude, 'test/e2e/**', 'test/**/*.peer.test.ts'],
    // vitest's default for a run is one worker fewer than the cores: a single one on 2 cores. The test
    // files wait on loopback servers and timers as much as they compute, so the quick loop uses every core.
    maxWorkers: '100%',
  },
});
