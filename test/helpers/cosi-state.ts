// The COSI test peer test/go/cosi-state (docs/architecture.md, "COSI judges the State API"): its
// server binary (cosi-project/runtime's in-memory State behind an Omni-style /api gateway) and its
// test binary (COSI's conformance suite over that gateway), built once per run by vitest's
// globalSetup (test/cosi-state-setup.ts) into node_modules/.cache/stub-provider-peers/, keyed by a
// hash of the module's files and the Go version, and started by the tests as child processes on
// loopback. Every wait has a time limit.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/keys.js';
import { runCommand, startWithReadyLine, type Child } from './child-process.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODULE = join(REPO, 'test', 'go', 'cosi-state');
const CACHE = join(REPO, 'node_modules', '.cache', 'stub-provider-peers');
const MINUTE = 60_000;
/** A cold build (empty module and build caches) takes 140 s of CPU, 1.5 to 5 min (docs/architecture.md). */
const BUILD_TIMEOUT_MS = 10 * MINUTE;

export interface CosiStateBinaries {
  /** `cosi-state`: serves the State (main.go). */
  server: string;
  /** The module's test binary: COSI's conformance suite (conformance_test.go). */
  conformance: string;
}

export type CosiStatePrepared = ({ ok: true } & CosiStateBinaries) | { ok: false; error: string };

declare module 'vitest' {
  export interface ProvidedContext {
    cosiState: CosiStatePrepared;
  }
}

/** Builds the server and the conformance test binary unless the cache has them for these files. */
export async function buildCosiState(go = process.env['GO'] ?? 'go'): Promise<CosiStateBinaries> {
  const files = readdirSync(MODULE).filter((f) => f === 'go.mod' || f === 'go.sum' || f.endsWith('.go')).sort();
  const version = await runCommand(go, ['env', 'GOVERSION', 'GOOS', 'GOARCH'], { timeoutMs: MINUTE });
  const h = createHash('sha256').update(version);
  for (const f of files) h.update(`\0${f}\0`).update(readFileSync(join(MODULE, f)));
  const key = `cosi-state-${h.digest('hex').slice(0, 16)}`;
  const out: CosiStateBinaries = { server: join(CACHE, key, 'cosi-state'), conformance: join(CACHE, key, 'cosi-state.test') };
  if (existsSync(out.server) && existsSync(out.conformance)) return out;
  mkdirSync(join(CACHE, key), { recursive: true });
  // Built beside the final path and renamed: a reader never sees half a binary. `-mod=readonly`: a
  // go.sum that does not cover the build fails instead of asking the checksum database.
  const build = async (target: string, args: string[]) => {
    const partial = `${target}.${process.pid}.partial`;
    await runCommand(go, [...args, '-mod=readonly', '-trimpath', '-o', partial, '.'], { cwd: MODULE, timeoutMs: BUILD_TIMEOUT_MS });
    renameSync(partial, target);
  };
  // One after the other: the second reuses the first's compiled packages, and 2 cores are enough for one.
  await build(out.server, ['build']);
  await build(out.conformance, ['test', '-c']);
  for (const old of readdirSync(CACHE)) if (old.startsWith('cosi-state-') && old !== key) rmSync(join(CACHE, old), { recursive: true, force: true });
  return out;
}

/** In a test: the binaries, or the reason they could not be built. */
export function cosiStateBinaries(): CosiStateBinaries {
  const p = inject('cosiState');
  if (!p) throw new Error('test/go/cosi-state was not prepared: run the tests through vitest with vitest.config.ts (its globalSetup builds it)');
  if (!p.ok) throw new Error(p.error);
  return p;
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

/** `stub-provider sim` (the built CLI) on a scenario; answers its endpoint and the keys it generated. */
export async function startSimProcess(scenario: string): Promise<{ endpoint: string; keys: Record<string, string>; close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'sim-scenario-'));
  const file = join(dir, 'scenario.yaml');
  await writeFile(file, scenario, { mode: 0o600 });
  try {
    const c = await startWithReadyLine(process.execPath, [join(REPO, 'dist', 'src', 'main.js'), 'sim', '--scenario', file]);
    return { endpoint: String(c.ready['endpoint']), keys: c.ready['keys'] as Record<string, string>, close: () => c.stop() };
  } finally {
    // The sim has read its scenario before it says it is ready.
    await rm(dir, { recursive: true, force: true });
  }
}
