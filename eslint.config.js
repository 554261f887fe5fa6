import js from '@eslint/js';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * The allowed arrows of docs/architecture.md ("Imports"), one zone per folder: a file in `target`
 * may import nothing of src/ but its own folder and the `allowed` ones (paths relative to src/).
 */
const arrows = [
  {
    folder: 'omni-api',
    allowed: [],
    why: 'src/omni-api is the model both sides speak: it imports nothing else of the project',
  },
  {
    folder: 'omni-client',
    allowed: ['omni-api', 'log.ts', 'version.ts'],
    why: 'src/omni-client talks to Omni and knows nothing of what to do',
  },
  {
    folder: 'omni-sim',
    allowed: ['omni-api'],
    why: 'src/omni-sim builds on src/omni-api only, never on the client it is a judge of',
  },
  { folder: 'wipe', allowed: ['omni-api', 'log.ts', 'exit-codes.ts'], why: 'src/wipe is a leaf behind its one door' },
  {
    folder: 'provider',
    allowed: ['omni-client', 'omni-api', 'wipe', 'log.ts', 'exit-codes.ts'],
    why: 'src/provider never sees the sim or the CLI',
  },
  { folder: 'log.ts', allowed: ['omni-api', 'redact.ts'], why: 'log.ts is a leaf' },
  { folder: 'redact.ts', allowed: [], why: 'redact.ts is a leaf: log.ts and the CLI use it alike' },
  { folder: 'exit-codes.ts', allowed: ['omni-api'], why: 'exit-codes.ts is a leaf' },
  { folder: 'version.ts', allowed: [], why: 'version.ts is a leaf' },
  { folder: 'gc-tuning.ts', allowed: [], why: 'gc-tuning.ts is a leaf' },
  {
    folder: 'early-signal.ts',
    allowed: [],
    why: 'early-signal.ts is loaded by main.ts before anything else: it imports nothing',
  },
  {
    folder: 'main.ts',
    allowed: ['early-signal.ts', 'start.ts'],
    why: 'main.ts checks the Node version before anything loads: early-signal.ts, then start.ts with import()',
  },
];

const zones = [
  ...arrows.map(({ folder, allowed, why }) => ({
    target: `./src/${folder}`,
    from: './src',
    except: [`./${folder}`, ...allowed.map((a) => `./${a}`)],
    message: `${why} (docs/architecture.md, "Imports").`,
  })),
  {
    target: ['./src/commands'],
    from: ['./src/cli.ts', './src/main.ts', './src/start.ts'],
    message:
      'Nothing below the CLI imports it: a command receives what it needs of the CLI at run time ' +
      '(CliContext; docs/architecture.md, "Imports").',
  },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.venv*/**'] },
  { languageOptions: { globals: { ...globals.node } } },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // Prettier (npm run lint: prettier --check) lays the code out at 120; this catches what it cannot break.
  { rules: { 'max-len': ['error', { code: 120, ignoreUrls: true }] } },
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
      // Prettier lays out member chains with a `[Symbol.asyncIterator]()` on a line of its own; no
      // statement can end there, so the rule's warning is about a layout Prettier owns.
      'no-unexpected-multiline': 'off',
    },
  },
  {
    // The arrows between the folders of src/, and no import cycle of any length (import-x leaves out
    // cycles made only of type imports, which vanish at run time).
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      // How import-x reads a TypeScript file it follows (for no-cycle) and resolves `./x.js` to `./x.ts`.
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      'import-x/no-restricted-paths': ['error', { zones }],
      'import-x/no-cycle': ['error', { maxDepth: Infinity, ignoreExternal: true }],
    },
  },
  {
    // Small functions, one concern per file (docs/architecture.md, "Sizes"): every line counts, comments and
    // blank lines included, and a function called where it is written (an IIFE) is a function too.
    files: ['src/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 350 }],
      'max-lines-per-function': ['error', { max: 80, IIFEs: true }],
    },
  },
);
