// The COSI test peer test/go/cosi-state (docs/architecture.md, "COSI judges the State API"): its
// server binary (cosi-project/runtime's in-memory State behind an Omni-style /api gateway) and its
// test binary (COSI's conformance suite over that gateway), built once per run like every Go peer
// (test/helpers/peers.ts, from vitest's globalSetup), and started by the tests as child processes on
// loopback. Every wait has a time limit.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { goPeerBinaries } from './peers.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { startWithReadyLine, type Child } from './child-process.js';
import { failOnControllerErrors } from './sim-process.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface CosiStateBinaries {
  /** `cosi-state`: serves the State (main.go). */
  server: string;
  /** The module's test binary: COSI's conformance suite (conformance_test.go). */
  conformance: string;
}

/** In a test: the binaries (built by the test peers' globalSetup, test/helpers/peers.ts), or why not. */
export function cosiStateBinaries(): CosiStateBinaries {
  const { binary, testBinary } = goPeerBinaries('cosi-state');
  if (!testBinary) throw new Error('test/go/cosi-state has no test binary (its conformance_test.go is missing)');
  return { server: binary, conformance: testBinary };
}

export interface Served {
  endpoint: string;
  /** An OMNI_SERVICE_ACCOUNT_KEY the server accepts. */
  key: string;
  close(): Promise<void>;
}

/**
 * Starts the COSI server accepting the signatures of `k` (a key pair made by the test; only its
 * public half is written, to a private temporary folder removed once the server has read it), or of
 * a key pair made now; answers its endpoint and the matching service-account key.
 */
export async function startCosiServer(k?: GeneratedKey): Promise<Served> {
  const { server } = cosiStateBinaries();
  k ??= await generateKey('infra-provider:cosi', { lifetimeSeconds: 3600 });
  const dir = await mkdtemp(join(tmpdir(), 'cosi-state-'));
  const pub = join(dir, 'public.asc');
  await writeFile(pub, k.armoredPublicKey, { mode: 0o600 });
  let c: Child;
  try {
    c = await startWithReadyLine(server, ['--public-key', pub]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return { endpoint: String(c.ready['endpoint']), key: k.serviceAccountKey, close: () => c.stop() };
}

/**
 * `stub-provider sim` (the built CLI) on a scenario; answers its endpoint and the keys it generated.
 * Its close fails when the sim logged an error of its controllers.
 */
export async function startSimProcess(
  scenario: string,
): Promise<{ endpoint: string; keys: Record<string, string>; close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'sim-scenario-'));
  const file = join(dir, 'scenario.yaml');
  await writeFile(file, scenario, { mode: 0o600 });
  try {
    const c = await startWithReadyLine(process.execPath, [
      join(REPO, 'dist', 'src', 'main.js'),
      'sim',
      '--scenario',
      file,
    ]);
    const close = async (): Promise<void> => {
      await c.stop();
      failOnControllerErrors(c.stderr());
    };
    return { endpoint: String(c.ready['endpoint']), keys: c.ready['keys'] as Record<string, string>, close };
  } finally {
    // The sim has read its scenario before it says it is ready.
    await rm(dir, { recursive: true, force: true });
  }
}
