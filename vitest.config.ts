import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds the Go peers and the Python virtual environment once per run (test/helpers/peers.ts).
    globalSetup: ['test/global-setup.ts'],
    // An error inside the simulated Omni's controllers fails the test that caused it.
    setupFiles: ['test/setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
