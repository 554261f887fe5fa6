// A simulated Omni that records every write of the provider it applied, for the tests of the outputs
// and the audit log (test/commands/outputs-audit.test.ts in this process, test/e2e/outputs-audit.test.ts
// with signals): what the sim applied is compared with what the audit log says was sent.

import type { Pointer } from '../../src/omni-api/resource.js';
import { createAccessApi } from '../../src/omni-sim/access/access.js';
import type { StateApi } from '../../src/omni-sim/api.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';

export const ID = 'bm';

/** A write as the sim applied it (a gateway call by the provider's identity that succeeded). */
export interface Applied {
  method: 'Create' | 'Update' | 'Destroy';
  resource: Pointer;
  version?: string;
  finalizers?: string[];
}

const ptr = (p: Pointer): Pointer => ({ namespace: p.namespace, type: p.type, id: p.id });

/** A sim of provider ID with `machines` stuck machines, recording in `applied` each write of ID it applied. */
export async function recordingSim(applied: Applied[], machines: number, latencyMs = 0): Promise<Sim> {
  const sim = await createSim(
    generateScenario({ providerId: ID, machines, omniVersion: '1.3.4', faults: latencyMs ? { latencyMs } : {} }),
    {
      access: (ctx) => {
        const api = createAccessApi(ctx.store, { version: ctx.omniVersion });
        return Object.assign(Object.create(api) as StateApi, {
          create: (w, r, owner) => {
            const out = api.create(w, r, owner);
            applied.push({ method: 'Create', resource: ptr(r.metadata) });
            return out;
          },
          update: (w, r, owner, phase) => {
            const out = api.update(w, r, owner, phase);
            applied.push({
              method: 'Update',
              resource: ptr(r.metadata),
              version: r.metadata.version,
              finalizers: [...r.metadata.finalizers],
            });
            return out;
          },
          destroy: (w, p, owner) => {
            api.destroy(w, p, owner);
            applied.push({ method: 'Destroy', resource: ptr(p) });
          },
        } satisfies Partial<StateApi>);
      },
    },
  );
  await sim.controllers?.idle();
  return sim;
}

/** The environment of the built CLI against `s`: the parent's without OMNI_* and STUB_PROVIDER_*, the key of ID. */
export function env(s: Sim): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const [k, v] of Object.entries(process.env)) if (!/^(OMNI_|STUB_PROVIDER_)/.test(k)) e[k] = v;
  return { ...e, OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`] };
}

/** Every resource of the sim with its version and finalizers, sorted. */
export const versions = (s: Sim) =>
  s.store
    .all()
    .map(({ metadata: m }) => `${m.namespace}/${m.type}/${m.id}@${m.version}:${m.finalizers.join(',')}`)
    .sort();
