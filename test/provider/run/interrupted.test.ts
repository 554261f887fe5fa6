// An interrupted run (SIGINT, SIGTERM) reports what it did, what was under way when the signal came
// (interrupted) and what it never started (not started): neither is a failure, in the JSON and in the text.

import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { executeRun } from '../../../src/commands/run.js';
import { createSim } from '../../../src/omni-sim/index.js';
import type { Sim } from '../../../src/omni-sim/index.js';
import { generateScenario } from '../../../src/omni-sim/scenario/generate.js';
import { renderText } from '../../../src/provider/report/text.js';
import { omniEnv, runConfigFrom, testIo } from '../../helpers/cli-config.js';
import { startTamperProxy } from '../../helpers/tamper-proxy.js';
import type { TamperProxy } from '../../helpers/tamper-proxy.js';

const ID = 'bm';
/** More than the items a run has under way at once (Limiter.forItems: at most 64 at the default concurrency). */
const MACHINES = 270;
const closing: (Sim | TamperProxy)[] = [];
afterEach(async () => {
  for (const c of closing.splice(0)) await c.close();
});

describe('an interrupted run', () => {
  it('SIGTERM at 1st of 270 InfraMachine Updates: none failed; under way interrupted, rest not started', async () => {
    const sim = await createSim(generateScenario({ providerId: ID, machines: MACHINES, omniVersion: '1.9.3' }));
    closing.push(sim);
    const signals = new EventEmitter();
    let sent = false;
    const proxy = await startTamperProxy(sim.endpoint, (r) => {
      if (!sent && r.rpc === 'Update' && JSON.stringify(r.body).includes('InfraMachines')) {
        sent = true;
        signals.emit('SIGTERM');
      }
      return undefined;
    });
    closing.push(proxy);
    const env = omniEnv(sim, ID, { endpoint: proxy.endpoint });
    const rep = await executeRun(runConfigFrom(['--concurrency', '4'], env), { ...testIo(env), signals });
    expect(sent).toBe(true);
    expect(rep).toMatchObject({ result: 'interrupted', exitCode: 143, failed: [] });
    const machines = (xs: { kind: string }[]) => xs.filter((x) => x.kind === 'InfraMachine').length;
    expect(machines(rep.interruptedItems)).toBeGreaterThan(0);
    expect(machines(rep.notStarted)).toBeGreaterThan(0);
    expect(machines(rep.released) + machines(rep.interruptedItems) + machines(rep.notStarted)).toBe(MACHINES);
    expect(rep.stage).toBe('releasing');
    const text = renderText(rep);
    expect(text).toMatch(/^Not started \(the signal came first; run again\) \(\d+\):$/m);
    expect(text).toMatch(/^Interrupted \(under way when the signal came; run again\) \(\d+\):$/m);
    expect(text).not.toMatch(/^Failed|Canceled|cancelled by the caller/m);
  }, 120_000);
});
