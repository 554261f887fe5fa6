// Proves that the golden tests bite: applies one mutation at a time to a copy of our spec codecs
// (swapped field numbers, a dropped field, a changed field type, codec rules broken) and runs only the
// golden tests (test/golden) on that copy; each mutation must make them fail by an assertion (every
// test still collected), never survive. The repository is not touched: the copy is a temporary tree
// (src, test, the configs; node_modules linked), removed afterwards.
//
//   node scripts/codec-mutations.mjs        (npm run test:mutations; .ci/run runs it after npm test)
//
// Prints one line per mutation and `codec mutations caught: N/M`; exits 1 unless all are caught.

import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runnerImport } from 'vite';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MESSAGES = 'src/omni-client/specs/messages.ts';
const CODEC = 'src/omni-client/specs/codec.ts';
const RUN_TIMEOUT_MS = 5 * 60_000;

/** Each: the file, one exact piece of text in it (it must occur once), and what it becomes. */
const MUTATIONS = [
  { name: 'swap the IPMI username and password field numbers', file: MESSAGES,
    from: "F.string(3, 'username'), F.string(4, 'password')", to: "F.string(4, 'username'), F.string(3, 'password')" },
  { name: 'swap MachineRequestSetSpec extensions (5) and kernel_args (6)', file: MESSAGES,
    from: "  F.string(5, 'extensions', { repeated: true }),\n  F.string(6, 'kernel_args', { repeated: true }),",
    to: "  F.string(6, 'extensions', { repeated: true }),\n  F.string(5, 'kernel_args', { repeated: true })," },
  { name: 'renumber SysVersionSpec.backend_api_version 3 -> 4', file: MESSAGES,
    from: "F.uint32(3, 'backend_api_version')", to: "F.uint32(4, 'backend_api_version')" },
  { name: 'drop InfraMachineSpec.node_unique_token', file: MESSAGES,
    from: "  F.string(10, 'node_unique_token'),\n", to: '' },
  { name: 'drop the bare-metal WipeStatusSpec.initial_wipe_done', file: MESSAGES,
    from: " F.bool(3, 'initial_wipe_done'),", to: '' },
  { name: 'type of the IPMI port: uint32 -> int32', file: MESSAGES,
    from: "F.uint32(2, 'port')", to: "F.int32(2, 'port')" },
  { name: 'type of InfraMachineSpec.install_event_id: uint64 -> uint32', file: MESSAGES,
    from: "F.uint64(9, 'install_event_id')", to: "F.uint32(9, 'install_event_id')" },
  { name: 'type of MachineRequestStatusSpec.stage: enum -> int32', file: MESSAGES,
    from: "F.enum(2, 'stage', StageEnum)", to: "F.int32(2, 'stage')" },
  { name: 'type of ConfigPatchSpec.data: string -> bytes', file: MESSAGES,
    from: "F.string(1, 'data'), F.bytes(2, 'compressed_data')", to: "F.bytes(1, 'data'), F.bytes(2, 'compressed_data')" },
  { name: 'type of InfraProviderHealthStatusSpec.last_heartbeat_timestamp: Timestamp -> string', file: MESSAGES,
    from: "F.timestamp(1, 'last_heartbeat_timestamp')", to: "F.string(1, 'last_heartbeat_timestamp')" },
  { name: "InfraMachineSpec.preferred_power_state read with InfraMachineStatusSpec's enum numbering", file: MESSAGES,
    from: "F.enum(1, 'preferred_power_state', InfraMachinePowerStateEnum)", to: "F.enum(1, 'preferred_power_state', InfraMachineStatusPowerStateEnum)" },
  { name: 'codec: unknown fields not written back', file: CODEC,
    from: '  for (const u of unknown ?? unknownFieldsOf(value)) w.raw(u.data);\n', to: '' },
  { name: 'codec: timestamp nanos not written', file: CODEC,
    from: '      if (t.nanos !== 0) w.tag(2, WireType.Varint).int32(t.nanos);\n', to: '' },
  { name: 'codec: empty strings written (proto3 leaves zero values out)', file: CODEC,
    from: "if (always || v !== '') w.tag(f.no, WireType.LengthDelimited).string(v);", to: 'w.tag(f.no, WireType.LengthDelimited).string(v);' },
  { name: 'codec: a list keeps only its last element', file: CODEC,
    from: '    if (f.repeated) (value[f.name] as unknown[]).push(v);', to: '    if (f.repeated) value[f.name] = [v];' },
];

function vitest(tree, out) {
  return new Promise((res) => {
    execFile(process.execPath, [join(REPO, 'node_modules/vitest/vitest.mjs'), 'run', 'test/golden', '--reporter=json', `--outputFile=${out}`],
      { cwd: tree, timeout: RUN_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 64 << 20, env: { ...process.env, CI: 'true' } },
      (err, stdout, stderr) => {
        let report;
        try {
          report = JSON.parse(readFileSync(out, 'utf8'));
        } catch {
          report = undefined;
        }
        rmSync(out, { force: true });
        res({ code: err ? (err.code ?? 1) : 0, report, output: `${stdout}\n${stderr}` });
      });
  });
}

async function main() {
  // The copy reads the same shared data and test venv as the repository; the Go peer is found in the
  // linked node_modules' cache (same module files, same hash).
  const { module: shared } = await runnerImport(join(REPO, 'test/helpers/shared-data.ts'));
  const { module: peers } = await runnerImport(join(REPO, 'test/helpers/peers.ts'));
  process.env.STUB_TEST_SHARED_DIR = shared.sharedDir();
  process.env.STUB_TEST_VENV = peers.venvDir();

  const started = Date.now();
  const tree = mkdtempSync(join(tmpdir(), 'stub-provider-mutations-'));
  const report = join(tree, '.vitest-report.json');
  try {
    for (const p of ['src', 'test', 'package.json', 'tsconfig.json', 'vitest.config.ts']) cpSync(join(REPO, p), join(tree, p), { recursive: true });
    symlinkSync(join(REPO, 'node_modules'), join(tree, 'node_modules'), 'dir');

    const baseline = await vitest(tree, report);
    const total = baseline.report?.numTotalTests ?? 0;
    if (baseline.code !== 0 || !baseline.report || baseline.report.numFailedTests !== 0 || total === 0) {
      console.error(baseline.output.split('\n').slice(-40).join('\n'));
      console.error('codec mutations: the golden tests do not pass on the unmutated copy; nothing to prove');
      return 1;
    }
    console.log(`codec mutations: golden tests pass unmutated (${total} tests); applying ${MUTATIONS.length} mutations`);

    let caught = 0;
    for (const m of MUTATIONS) {
      const original = readFileSync(join(REPO, m.file), 'utf8');
      const at = original.indexOf(m.from);
      if (at < 0 || original.indexOf(m.from, at + 1) >= 0) {
        console.log(`  NOT APPLIED  ${m.name}: the text to mutate is not in ${m.file} exactly once (update scripts/codec-mutations.mjs)`);
        continue;
      }
      writeFileSync(join(tree, m.file), original.slice(0, at) + m.to + original.slice(at + m.from.length));
      const r = await vitest(tree, report);
      writeFileSync(join(tree, m.file), original);
      const failed = r.report?.numFailedTests ?? 0;
      const collected = r.report?.numTotalTests ?? 0;
      if (r.code !== 0 && failed > 0 && collected === total) {
        caught++;
        console.log(`  caught       ${m.name} (${failed} of ${total} tests failed)`);
      } else if (r.code !== 0) {
        console.log(`  BROKE        ${m.name}: the golden tests did not run (${collected} of ${total} collected); fix the mutation`);
        console.log(r.output.split('\n').slice(-20).map((l) => `      ${l}`).join('\n'));
      } else {
        console.log(`  SURVIVED     ${m.name}: every golden test passed`);
      }
    }
    console.log(`codec mutations caught: ${caught}/${MUTATIONS.length} (in ${Math.round((Date.now() - started) / 1000)} s)`);
    return caught === MUTATIONS.length ? 0 : 1;
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

if (!existsSync(join(REPO, 'node_modules/vitest/vitest.mjs'))) {
  console.error('codec mutations: node_modules/vitest is missing; run npm ci first');
  process.exit(1);
}
process.exitCode = await main();
