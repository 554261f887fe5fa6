// Shows that tests bite: applies one mutation at a time to a copy of the repository and runs the
// given test files on that copy; every mutation must make every one of them fail by an assertion
// (or, with `caughtBy: 'any'`, at least one of them; all their tests still collected), never survive. The repository is
// not touched: the copy is a
// temporary tree (src, test, scripts, the configs, dist; node_modules linked), removed afterwards.
// A mutated file under src/ is also compiled alone into the copy's dist/, for the tests that run
// the built CLI (`stub-provider sim`).
//
// Used by scripts/state-mutations.mjs and scripts/codec-mutations.mjs; prints one line per mutation
// and `<label> caught: N/M`.

import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RUN_TIMEOUT_MS = 5 * 60_000;
const COPIED = [
  'src',
  'test',
  'scripts',
  'dist',
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'vitest.config.ts',
];

function vitest(tree, files, out) {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [join(REPO, 'node_modules/vitest/vitest.mjs'), 'run', ...files, '--reporter=json', `--outputFile=${out}`],
      {
        cwd: tree,
        timeout: RUN_TIMEOUT_MS,
        killSignal: 'SIGKILL',
        maxBuffer: 64 << 20,
        env: { ...process.env, CI: 'true' },
      },
      (err, stdout, stderr) => {
        let report;
        try {
          report = JSON.parse(readFileSync(out, 'utf8'));
        } catch {
          report = undefined;
        }
        rmSync(out, { force: true });
        res({ code: err ? (err.code ?? 1) : 0, report, output: `${stdout}\n${stderr}` });
      },
    );
  });
}

/** Failed and collected tests per test file of a vitest JSON report. */
function perFile(report, tree) {
  const out = new Map();
  for (const f of report?.testResults ?? []) {
    const name = f.name.startsWith(tree) ? f.name.slice(tree.length + 1) : f.name;
    out.set(name, {
      failed: f.assertionResults.filter((a) => a.status === 'failed').length,
      total: f.assertionResults.length,
    });
  }
  return out;
}

/** Compiles one TypeScript file of the copy into its dist/ (same path under dist/, .js). */
function compileAlone(tree, file) {
  const { config } = ts.readConfigFile(join(tree, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, tree);
  // The package is ESM ("type": "module"); transpiled alone, a file would not know it under NodeNext.
  const js = ts.transpileModule(readFileSync(join(tree, file), 'utf8'), {
    compilerOptions: { ...options, module: ts.ModuleKind.ESNext },
    fileName: file,
  }).outputText;
  writeFileSync(join(tree, 'dist', file.replace(/\.ts$/, '.js')), js);
}

/**
 * `caughtBy`: 'every' file must fail (default), or 'any' of them (suites that each check a part).
 * `built`: whether the tests run the built CLI, so the copy needs dist/ (default true).
 * @param {{ label: string, files: string[], mutations: { name: string, file: string, from: string, to: string }[],
 * env?: Record<string, string>, concurrency?: number, caughtBy?: 'every' | 'any', built?: boolean }} o
 * @returns {Promise<number>} the exit code: 0 when every mutation was caught
 */
export async function checkMutations({
  label,
  files,
  mutations,
  env = {},
  concurrency = 5,
  caughtBy = 'every',
  built = true,
}) {
  if (!existsSync(join(REPO, 'node_modules/vitest/vitest.mjs'))) {
    console.error(`${label}: node_modules/vitest is missing; run npm ci first`);
    return 1;
  }
  if (built && !existsSync(join(REPO, 'dist/src/main.js'))) {
    console.error(`${label}: dist/ is missing; run npm run build first`);
    return 1;
  }
  Object.assign(process.env, env);
  const trees = [];
  const copy = () => {
    const tree = mkdtempSync(join(tmpdir(), 'stub-provider-mutations-'));
    trees.push(tree);
    for (const p of COPIED) if (built || p !== 'dist') cpSync(join(REPO, p), join(tree, p), { recursive: true });
    symlinkSync(join(REPO, 'node_modules'), join(tree, 'node_modules'), 'dir');
    return tree;
  };
  try {
    const first = copy();
    const baseline = await vitest(first, files, join(first, '.vitest-report.json'));
    const base = perFile(baseline.report, first);
    const total = baseline.report?.numTotalTests ?? 0;
    if (baseline.code !== 0 || baseline.report?.numFailedTests !== 0 || base.size !== files.length || total === 0) {
      console.error(baseline.output.split('\n').slice(-40).join('\n'));
      console.error(`${label}: the tests do not pass on the unmutated copy; nothing to show`);
      return 1;
    }
    console.log(
      `${label}: ${files.length} test files pass unmutated (${total} tests); applying ${mutations.length} mutations, ` +
        `${concurrency} at a time`,
    );

    // Each mutation in a copy of its own: a failing suite mostly waits (for events that never
    // come), so a few run side by side in about the time of one.
    const one = async (m, tree) => {
      const original = readFileSync(join(REPO, m.file), 'utf8');
      const at = original.indexOf(m.from);
      if (at < 0 || original.indexOf(m.from, at + 1) >= 0) {
        return {
          ok: false,
          line: `  NOT APPLIED  ${m.name}: the text to mutate is not in ${m.file} exactly once (update the mutation)`,
        };
      }
      writeFileSync(join(tree, m.file), original.slice(0, at) + m.to + original.slice(at + m.from.length));
      if (built && m.file.startsWith('src/')) compileAlone(tree, m.file);
      const r = await vitest(tree, files, join(tree, '.vitest-report.json'));
      const got = perFile(r.report, tree);
      const counts = files.map((f) => ({
        f,
        ...(got.get(f) ?? { failed: 0, total: 0 }),
        want: base.get(f)?.total ?? 0,
      }));
      const collectedAll = counts.every((c) => c.total === c.want);
      const summary = counts.map((c) => `${c.f.split('/').pop()}: ${c.failed}/${c.want}`).join(', ');
      if (collectedAll && (caughtBy === 'any' ? counts.some((c) => c.failed > 0) : counts.every((c) => c.failed > 0)))
        return { ok: true, line: `  caught       ${m.name} (failed: ${summary})` };
      if (!collectedAll) {
        const tail = r.output
          .split('\n')
          .slice(-20)
          .map((l) => `      ${l}`)
          .join('\n');
        return {
          ok: false,
          line: `  BROKE        ${m.name}: not every test was collected (${summary}); fix the mutation\n${tail}`,
        };
      }
      return {
        ok: false,
        line:
          `  SURVIVED     ${m.name}: ${caughtBy === 'any' ? 'every test' : 'some test files'} passed in full ` +
          `(failed: ${summary})`,
      };
    };
    const results = new Array(mutations.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, mutations.length) }, async (_, slot) => {
        const tree = slot === 0 ? first : copy();
        for (let i = next++; i < mutations.length; i = next++) {
          results[i] = await one(mutations[i], tree);
          // Back to the unmutated files for the next mutation in this copy.
          const m = mutations[i];
          writeFileSync(join(tree, m.file), readFileSync(join(REPO, m.file)));
          if (built && m.file.startsWith('src/'))
            cpSync(
              join(REPO, 'dist', m.file.replace(/\.ts$/, '.js')),
              join(tree, 'dist', m.file.replace(/\.ts$/, '.js')),
            );
        }
      }),
    );
    for (const r of results) console.log(r.line);
    const caught = results.filter((r) => r.ok).length;
    console.log(`${label} caught: ${caught}/${mutations.length}`);
    return caught === mutations.length ? 0 : 1;
  } finally {
    for (const t of trees) rmSync(t, { recursive: true, force: true });
  }
}
