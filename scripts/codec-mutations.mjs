// Proves that the golden tests bite: applies one mutation at a time to a copy of our spec codecs
// (swapped field numbers, a dropped field, a changed field type, codec rules broken) and runs only the
// golden tests (test/golden) on that copy; each mutation must make them fail by an assertion (every
// test still collected), never survive. The mechanism is scripts/mutations.mjs (the repository is not
// touched: each copy is a temporary tree, removed afterwards).
//
//   node scripts/codec-mutations.mjs        (npm run test:mutations; .ci/run runs it after npm test)
//
// Prints one line per mutation and `codec mutations caught: N/M`; exits 1 unless all are caught.

import { join } from 'node:path';
import { runnerImport } from 'vite';
import { REPO, checkMutations } from './mutations.mjs';

const MESSAGES = 'src/omni-api/specs/messages.ts';
const BARE_METAL = 'src/omni-api/specs/bare-metal.ts';
const CODEC = 'src/omni-api/specs/codec.ts';

/** Each: the file, one exact piece of text in it (it must occur once), and what it becomes. */
const MUTATIONS = [
  {
    name: 'swap the IPMI username and password field numbers',
    file: MESSAGES,
    from: "F.string(3, 'username'),\n  F.string(4, 'password')",
    to: "F.string(4, 'username'),\n  F.string(3, 'password')",
  },
  {
    name: 'swap MachineRequestSetSpec extensions (5) and kernel_args (6)',
    file: MESSAGES,
    from: "  F.string(5, 'extensions', { repeated: true }),\n  F.string(6, 'kernel_args', { repeated: true }),",
    to: "  F.string(6, 'extensions', { repeated: true }),\n  F.string(5, 'kernel_args', { repeated: true }),",
  },
  {
    name: 'renumber SysVersionSpec.backend_api_version 3 -> 4',
    file: MESSAGES,
    from: "F.uint32(3, 'backend_api_version')",
    to: "F.uint32(4, 'backend_api_version')",
  },
  {
    name: 'drop InfraMachineSpec.node_unique_token',
    file: MESSAGES,
    from: "  F.string(10, 'node_unique_token'),\n",
    to: '',
  },
  {
    name: 'drop the bare-metal WipeStatusSpec.initial_wipe_done',
    file: BARE_METAL,
    from: " F.bool(3, 'initial_wipe_done'),",
    to: '',
  },
  {
    name: 'type of the IPMI port: uint32 -> int32',
    file: MESSAGES,
    from: "F.uint32(2, 'port')",
    to: "F.int32(2, 'port')",
  },
  {
    name: 'type of InfraMachineSpec.install_event_id: uint64 -> uint32',
    file: MESSAGES,
    from: "F.uint64(9, 'install_event_id')",
    to: "F.uint32(9, 'install_event_id')",
  },
  {
    name: 'type of MachineRequestStatusSpec.stage: enum -> int32',
    file: MESSAGES,
    from: "F.enum(2, 'stage', StageEnum)",
    to: "F.int32(2, 'stage')",
  },
  {
    name: 'type of ConfigPatchSpec.data: string -> bytes',
    file: MESSAGES,
    from: "F.string(1, 'data'),\n  F.bytes(2, 'compressed_data')",
    to: "F.bytes(1, 'data'),\n  F.bytes(2, 'compressed_data')",
  },
  {
    name: 'type of InfraProviderHealthStatusSpec.last_heartbeat_timestamp: Timestamp -> string',
    file: MESSAGES,
    from: "F.timestamp(1, 'last_heartbeat_timestamp')",
    to: "F.string(1, 'last_heartbeat_timestamp')",
  },
  {
    name: "InfraMachineSpec.preferred_power_state read with InfraMachineStatusSpec's enum numbering",
    file: MESSAGES,
    from: "F.enum(1, 'preferred_power_state', InfraMachinePowerStateEnum)",
    to: "F.enum(1, 'preferred_power_state', InfraMachineStatusPowerStateEnum)",
  },
  {
    name: 'codec: unknown fields not written back',
    file: CODEC,
    from: '  for (const u of unknown ?? unknownFieldsOf(value)) w.raw(u.data);\n',
    to: '',
  },
  {
    name: 'codec: timestamp nanos not written',
    file: CODEC,
    from: '      if (t.nanos !== 0) w.tag(2, WireType.Varint).int32(t.nanos);\n',
    to: '',
  },
  {
    name: 'codec: empty strings written (proto3 leaves zero values out)',
    file: CODEC,
    from: "if (always || v !== '') w.tag(f.no, WireType.LengthDelimited).string(v);",
    to: 'w.tag(f.no, WireType.LengthDelimited).string(v);',
  },
  {
    name: 'codec: a list keeps only its last element',
    file: CODEC,
    from: '    if (f.repeated) (value[f.name] as unknown[]).push(v);',
    to: '    if (f.repeated) value[f.name] = [v];',
  },
];

// The copy reads the same shared data and test venv as the repository; the Go peer is found in the
// linked node_modules' cache (same module files, same hash).
const { module: shared } = await runnerImport(join(REPO, 'test/helpers/shared-data.ts'));
const { module: peers } = await runnerImport(join(REPO, 'test/helpers/peers.ts'));
process.exitCode = await checkMutations({
  label: 'codec mutations',
  files: ['test/omni-api/specs/golden.peer.test.ts', 'test/omni-api/specs/coverage.peer.test.ts'],
  mutations: MUTATIONS,
  env: { STUB_TEST_SHARED_DIR: shared.sharedDir(), STUB_TEST_VENV: peers.venvDir() },
  // Each golden file checks a part of the codecs (vectors, coverage): one failing catches it. No
  // built CLI in these tests; they are CPU-bound, so two at a time on two cores.
  caughtBy: 'any',
  built: false,
  concurrency: 2,
});
