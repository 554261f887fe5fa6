// vitest globalSetup: prepares the test peers (test/helpers/peers.ts) once per run, in the main
// process before any test file starts, and hands the result to the tests through `provide`.

import type { TestProject } from 'vitest/node';
import { preparePeers } from './helpers/peers.js';

export default async function setup(project: TestProject): Promise<void> {
  const peers = await preparePeers();
  for (const p of [peers.python, ...Object.values(peers.go)]) if (!p.ok) console.error(`test peers: ${p.error}`);
  project.provide('peers', peers);
}
