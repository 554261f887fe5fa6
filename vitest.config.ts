import { defineConfig, type ViteUserConfig } from 'vitest/config';

/** What every run shares: `npm test` (this file, the whole suite) and `npm run test:quick` (vitest.quick.config.ts). */
export const shared: NonNullable<ViteUserConfig['test']> = {
  include: ['test/**/*.test.ts'],
  // An error inside the simulated Omni's controllers fails the test that caused it.
  setupFiles: ['test/setup.ts'],
  testTimeout: 30_000,
  hookTimeout: 30_000,
  pool: 'forks',
  reporters: ['default'],
};

export default defineConfig({
  test: {
    ...shared,
    // Builds the Go peers and the Python virtual environment once per run (test/helpers/peers.ts).
    globalSetup: ['test/global-setup.ts'],
  },
});
