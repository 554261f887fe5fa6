// Prepares the test peers before the tests (.ci/run): the Go modules of test/go/* from the module
// proxy, each Go peer's build, and the Python virtual environment of test/python/requirements.txt,
// through test/helpers/peers.ts (the same code vitest's globalSetup runs, which then finds them done).
// Prints what each step took; exits 1 with the reason when one fails.

import { runnerImport } from 'vite';

const { module: peers } = await runnerImport(new URL('../test/helpers/peers.ts', import.meta.url).pathname);

let failed = false;
for (const name of peers.GO_PEERS) {
  const started = Date.now();
  try {
    await peers.downloadGoModules(name);
    console.log(
      `test peers: Go modules of test/go/${name} downloaded (${((Date.now() - started) / 1000).toFixed(1)} s)`,
    );
  } catch (e) {
    failed = true;
    console.error(
      `test peers: go mod download of test/go/${name} failed: ${e.message}\n  It needs the Go module proxy ` +
        `(GOPROXY=${process.env.GOPROXY ?? 'default'}); go.sum is committed, so no checksum-database lookup is ` +
        `needed.`,
    );
  }
}

const prepared = await peers.preparePeers();
for (const [what, seconds] of Object.entries(prepared.seconds)) console.log(`test peers: ${what}: ${seconds} s`);
for (const p of [prepared.python, ...Object.values(prepared.go)]) {
  if (!p.ok) {
    failed = true;
    console.error(`test peers: ${p.error}`);
  }
}
process.exitCode = failed ? 1 : 0;
