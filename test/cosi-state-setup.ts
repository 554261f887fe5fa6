// vitest globalSetup: builds the COSI test peer (test/helpers/cosi-state.ts) once per run, in the main
// process before any test file starts, and hands the result to the tests through `provide`; a failed
// build is reported here and fails the tests that need the peer, with the reason.

import type { TestProject } from 'vitest/node';
import { buildCosiState, type CosiStatePrepared } from './helpers/cosi-state.js';

export default async function setup(project: TestProject): Promise<void> {
  let prepared: CosiStatePrepared;
  const started = Date.now();
  try {
    prepared = { ok: true, ...(await buildCosiState()) };
  } catch (e) {
    prepared = {
      ok: false,
      error: `building test/go/cosi-state: ${(e as Error).message}\nThe COSI tests need Go (see test/go/cosi-state/go.mod for the version) and the Go module proxy; .ci/run prepares them.`,
    };
    console.error(`test peers: ${prepared.error}`);
  }
  const seconds = (Date.now() - started) / 1000;
  if (seconds > 5) console.error(`test peers: test/go/cosi-state built in ${seconds.toFixed(1)} s`);
  project.provide('cosiState', prepared);
}
