// `stub-provider sim` (the built CLI) in a child process serving a scenario, for tests that run the
// built CLI against it: the endpoint and keys from its ready line, and its final state from the dump
// it writes on SIGTERM.

import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Resource } from '../../src/omni-client/resource.js';
import { dumpScenario, parseScenario, type Scenario } from '../../src/omni-sim/scenario.js';

import { MAIN } from './cli-process.js';

export { MAIN };

export interface SimProcess {
  endpoint: string;
  /** OMNI_SERVICE_ACCOUNT_KEY values by identity name. */
  keys: Record<string, string>;
  /** The scenario's resources as the sim reads them (through the YAML). */
  before: Resource[];
  /** SIGTERM, then the state the sim dumped. */
  stop(): Promise<Resource[]>;
}

/** Writes the scenario into `dir` and serves it; resolves once the sim printed its ready line. */
export async function startSimProcess(scenario: Scenario, dir: string): Promise<SimProcess> {
  const file = join(dir, 'scenario.yaml');
  await writeFile(file, dumpScenario(scenario));
  const dump = join(dir, 'dump.yaml');
  const proc = spawn(process.execPath, [MAIN, 'sim', '--scenario', file, '--dump', dump], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stderr.resume();
  const ready = JSON.parse(await firstLine(proc.stdout)) as { endpoint: string; keys: Record<string, string> };
  return {
    endpoint: ready.endpoint,
    keys: ready.keys,
    before: parseScenario(dumpScenario(scenario)).resources,
    stop: async () => {
      proc.kill('SIGTERM');
      if (proc.exitCode === null && proc.signalCode === null) await new Promise((r) => proc.on('exit', r));
      return parseScenario(await readFile(dump, 'utf8')).resources;
    },
  };
}

function firstLine(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: stream });
    rl.once('line', (l) => { resolve(l); rl.close(); });
    rl.once('close', () => reject(new Error('no ready line')));
  });
}
