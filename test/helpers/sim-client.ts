// The set-up of the tests against a simulated Omni in this process: the sim, what is put in front of
// it (a tampering proxy), and the gateway client logged in to it as a provider, each closed after
// the test that opened it, the last opened first (the client, then the proxy, then the sim); or one
// sim for a whole file.

import { afterAll, afterEach, beforeAll } from 'vitest';
import { createOmniClient, type OmniClient, type OmniClientOptions } from '../../src/omni-client/client.js';
import { createSim, type Sim, type SimOptions } from '../../src/omni-sim/index.js';

type Scenario = Parameters<typeof createSim>[0];

export interface SimSetup {
  /** A sim of `scenario` (createSim), closed after the test. */
  sim(scenario: Scenario, options?: SimOptions): Promise<Sim>;
  /**
   * A client logged in to `sim` as provider `id` (its key from the sim), at `o.endpoint` when given (a proxy in front
   * of the sim), with the other options of `o`; closed after the test.
   */
  client(sim: Sim, id: string, o?: Partial<OmniClientOptions>): Promise<OmniClient>;
  /** Anything else the test opened (a proxy), closed after it. */
  closing<T extends { close(): Promise<unknown> }>(x: T): T;
}

/** The set-up of each test of the file (call at its top): what it opens is closed after it. */
export function simEachTest(): SimSetup {
  const open: { close(): Promise<unknown> }[] = [];
  afterEach(async () => {
    for (const x of open.splice(0).reverse()) await x.close();
  });
  const closing = <T extends { close(): Promise<unknown> }>(x: T): T => {
    open.push(x);
    return x;
  };
  return {
    sim: async (scenario, options) => closing(await createSim(scenario, options)),
    client: async (sim, id, o = {}) =>
      closing(await createOmniClient({ endpoint: sim.endpoint, key: sim.keys[`infra-provider:${id}`]!, ...o })),
    closing,
  };
}

/** One sim of `scenario` for the whole file (call at its top): started before its first test, closed after its last. */
export function simForFile(scenario: Scenario, options?: SimOptions): () => Sim {
  let sim: Sim | undefined;
  beforeAll(async () => {
    sim = await createSim(scenario, options);
  });
  afterAll(async () => {
    await sim?.close();
  });
  return () => {
    if (!sim) throw new Error('simForFile: the sim is not started (outside a test?)');
    return sim;
  };
}
