import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.venv*/**'] },
  { languageOptions: { globals: { ...globals.node } } },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  {
    // The one-way import rule of docs/design.md: nothing in the client or the provider may import the sim.
    files: ['src/omni-client/**/*.ts', 'src/provider/**/*.ts', 'src/wipe/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/omni-sim/**', '../omni-sim/*'], message: 'src/omni-client, src/provider and src/wipe must not import src/omni-sim (design.md, Layout).' }] }],
    },
  },
  {
    files: ['src/omni-client/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/omni-sim/**', '**/provider/**', '**/wipe/**'], message: 'src/omni-client knows nothing of what to do (design.md, Layout).' }] }],
    },
  },
);
