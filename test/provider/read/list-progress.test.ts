// A long List is never a silent step (docs/operator-guide.md "What the terminal shows"): while a kind's List
// streams from Omni, the snapshot tells its stage how many resources came in so far, before the List is in; over the
// real HTTP gateway of the sim.

import { expect, it } from 'vitest';
import { T } from '../../../src/omni-api/resource.js';
import { LIST_PROGRESS_EVERY } from '../../../src/omni-api/state.js';
import { generateScenario } from '../../../src/omni-sim/scenario/generate.js';
import { takeSnapshot } from '../../../src/provider/read/snapshot.js';
import type { StageDetail } from '../../../src/provider/run/stage.js';
import { simEachTest } from '../../helpers/sim-client.js';

const ID = 'bench';
const MACHINES = 1_200;

const omni = simEachTest();

it('a List tells how many came in so far while it streams (client), and the snapshot says it as reading', async () => {
  const sim = await omni.sim(generateScenario({ providerId: ID, machines: MACHINES, omniVersion: '1.9.3' }));
  const client = await omni.client(sim, ID);
  const told: number[] = [];
  const all = await client.state.list('infra-provider', T.InfraMachine, { onProgress: (n) => told.push(n) });
  expect(all).toHaveLength(MACHINES);
  expect(told).toEqual([LIST_PROGRESS_EVERY, 2 * LIST_PROGRESS_EVERY]);

  const stages: StageDetail[] = [];
  await takeSnapshot(client.state, {
    providerId: ID,
    profile: 'auto',
    stateTypes: [],
    stage: (stage, d) => {
      if (stage === 'reading' && d?.kind === T.InfraMachine) stages.push(d);
    },
  });
  expect(stages.map((d) => d.count)).toEqual([LIST_PROGRESS_EVERY, 2 * LIST_PROGRESS_EVERY, MACHINES]);
}, 60_000);

it('a List hands each resource to the caller’s keep as it arrives, and answers what keep returned', async () => {
  const sim = await omni.sim(generateScenario({ providerId: ID, machines: MACHINES, omniVersion: '1.9.3' }));
  const client = await omni.client(sim, ID);
  const kept: string[] = [];
  const keptWhenTold: number[] = [];
  const all = await client.state.list('infra-provider', T.InfraMachine, {
    keep: (r) => {
      kept.push(r.metadata.id);
      return { metadata: r.metadata, spec: { protoSpec: new Uint8Array(0), omitted: true } };
    },
    onProgress: () => keptWhenTold.push(kept.length),
  });
  expect(all.map((r) => r.metadata.id)).toEqual(kept);
  expect(new Set(kept).size).toBe(MACHINES);
  expect(all.every((r) => r.spec.omitted === true)).toBe(true);
  // Kept one by one while the List streamed, not after it (told of the 500th just before it is kept).
  expect(keptWhenTold).toEqual([LIST_PROGRESS_EVERY - 1, 2 * LIST_PROGRESS_EVERY - 1]);
}, 60_000);
