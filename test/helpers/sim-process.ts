// `stub-provider sim` (the built CLI) in a child process serving a scenario, for tests that run the
// built CLI against it: the endpoint and keys from its ready line, and its final state from the dump
// it writes on SIGTERM. An error inside the sim's controllers, which the sim logs, fails the stop.

import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Resource } from '../../src/omni-api/resource.js';
import { dumpScenario, parseScenario, type Scenario } from '../../src/omni-sim/scenario/scenario.js';

import { MAIN } from './cli-process.js';

export interface SimProcess {
  endpoint: string;
  /** OMNI_SERVICE_ACCOUNT_KEY values by identity name. */
  keys: Record<string, string>;
  /** The scenario's resources as the sim reads them (through the YAML). */
  before: Resource[];
  /** SIGTERM, then the state the sim dumped; rejects when the sim logged an error of its controllers. */
  stop(): Promise<Resource[]>;
}

/** Writes the scenario into `dir` and serves it; resolves once the sim printed its ready line. */
export async function startSimProcess(scenario: Scenario, dir: string): Promise<SimProcess> {
  const file = join(dir, 'scenario.yaml');
  await writeFile(file, dumpScenario(scenario));
  const dump = join(dir, 'dump.yaml');
  const proc = spawn(process.execPath, [MAIN, 'sim', '--scenario', file, '--dump', dump], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => {
    if (stderr.length < 1 << 20) stderr += d.toString();
  });
  const ready = JSON.parse(await firstLine(proc.stdout)) as { endpoint: string; keys: Record<string, string> };
  return {
    endpoint: ready.endpoint,
    keys: ready.keys,
    before: parseScenario(dumpScenario(scenario)).resources,
    stop: async () => {
      proc.kill('SIGTERM');
      if (proc.exitCode === null && proc.signalCode === null) await new Promise((r) => proc.on('exit', r));
      failOnControllerErrors(stderr);
      return parseScenario(await readFile(dump, 'utf8')).resources;
    },
  };
}

function firstLine(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: stream });
    rl.once('line', (l) => {
      resolve(l);
      rl.close();
    });
    rl.once('close', () => reject(new Error('no ready line')));
  });
}

/**
 * Throws when the log of a `stub-provider sim` holds an error of its controllers (it logs each
 * ControllerError of src/omni-sim/controllers/controllers.ts with the error's message).
 */
export function failOnControllerErrors(stderr: string): void {
  const lines = stderr.split('\n').filter((l) => l.includes("the simulated Omni's controller task"));
  if (lines.length > 0)
    throw new Error(`the simulated Omni's controllers failed (${lines.length}):\n${lines.slice(0, 5).join('\n')}`);
}
