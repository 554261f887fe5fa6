import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds the COSI test peer test/go/cosi-state once per run (test/helpers/cosi-state.ts).
    globalSetup: ['test/cosi-state-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
