// Positive evidence as a property (docs/design.md rule 10): fast-check draws fleets of running
// and tearing-down machines and requests (some already gone, leaving their statuses, state and
// ConfigPatchRequests behind) and a tampering proxy (test/helpers/tamper-proxy.ts) between the stub
// and the simulated Omni withholds a random subset of List lines (the same ones every time, or only
// on some calls), empties whole Lists and injects `{"result":{}}` lines. Whatever the Lists say, the
// stub never destroys or changes anything whose machine or request exists and is in use, releases a
// machine or request only after its statuses and state, and never deregisters while a machine or
// request of the provider exists. The relation "belongs to" is
// written out again here (not taken from src/provider), from docs/omni-lifecycle.md 1 and 3.1.

import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { createOmniClient } from '../../src/omni-client/client.js';
import type { Resource } from '../../src/omni-api/resource.js';
import {
  LABEL_INFRA_PROVIDER_ID,
  LABEL_MACHINE_REQUEST,
  NS_INFRA_PROVIDER,
  T,
  newMetadata,
} from '../../src/omni-api/resource.js';
import { silentLogger } from '../../src/log.js';
import {
  bareMetalMachine,
  machineUuid,
  providerRegistration,
  provisionedRequest,
} from '../../src/omni-sim/scenario/generate.js';
import { createSim } from '../../src/omni-sim/index.js';
import { generateKey, type GeneratedKey } from '../../src/omni-sim/scenario/keys.js';
import { reconcile } from '../../src/provider/run/reconcile.js';
import { canonical, checkRelease, keyOf } from '../helpers/release-oracle.js';
import { resultOf, startTamperProxy } from '../helpers/tamper-proxy.js';

const ID = 'bare-metal';
const NS = `infra-provider:${ID}`;
const PER_MACHINE = ['BMCConfiguration', 'MachineStatus', 'PowerOperation', 'RebootStatus', 'WipeStatus'].map(
  (n) => `${n}.${ID}.infraprovider.sidero.dev`,
);
const PER_REQUEST = [`Machine.${ID}.infraprovider.sidero.dev`];
/** Every type the stub lists, so that any of them may be tampered with. */
const LISTED = [
  T.InfraMachine,
  T.InfraMachineStatus,
  T.BMCConfig,
  T.MachineRequest,
  T.MachineRequestStatus,
  T.ConfigPatchRequest,
  T.Machine,
  ...PER_MACHINE,
  ...PER_REQUEST,
  `TLSConfig.${ID}.infraprovider.sidero.dev`,
];

const RUNS = Number(process.env.EVIDENCE_RUNS ?? 15);

const itemArb = fc.record({
  kind: fc.constantFrom('machine' as const, 'request' as const),
  phase: fc.constantFrom('running' as const, 'tearingDown' as const),
  /** false: the machine or request is gone, what it left behind is not. */
  parent: fc.constantFrom(true, true, true, false),
  cprs: fc.nat({ max: 2 }),
});

const caseArb = fc.record({
  items: fc.array(itemArb, { minLength: 1, maxLength: 6 }),
  staticLabel: fc.boolean(),
  /** Indexes (modulo the number of resources) of the resources whose List lines are withheld. */
  hidden: fc.uniqueArray(fc.nat({ max: 80 }), { maxLength: 12 }),
  /** Withhold them in every List call, or only in calls of odd number (a proxy that drops lines now and then). */
  flaky: fc.boolean(),
  /** Lists answered with an empty body, and Lists with a `{"result":{}}` line injected. */
  emptied: fc.subarray(LISTED, { maxLength: 4 }),
  injected: fc.subarray(LISTED, { maxLength: 2 }),
});
type Case = typeof caseArb extends fc.Arbitrary<infer C> ? C : never;

function configPatchRequest(rid: string, n: number): Resource {
  return {
    metadata: newMetadata(
      { namespace: NS_INFRA_PROVIDER, type: T.ConfigPatchRequest, id: `${rid}-patch-${n}` },
      {
        version: '2',
        owner: `${ID}.ProvisionController`,
        finalizers: ['ConfigPatchRequestController'],
        labels: { [LABEL_INFRA_PROVIDER_ID]: ID, [LABEL_MACHINE_REQUEST]: rid },
      },
    ),
    spec: { protoSpec: new Uint8Array([0x0a, 0x01, 0x78]) },
  };
}

function fleet(c: Case): Resource[] {
  const out = [...providerRegistration(ID, { static: c.staticLabel })];
  c.items.forEach((it, i) => {
    let rs: Resource[];
    if (it.kind === 'machine') {
      rs = bareMetalMachine(ID, machineUuid(i, 21), { phase: it.phase });
    } else {
      const rid = `w-${i}`;
      rs = [
        ...provisionedRequest(ID, rid, { phase: it.phase }),
        ...Array.from({ length: it.cprs }, (_, n) => configPatchRequest(rid, n)),
      ];
    }
    out.push(...(it.parent ? rs : rs.slice(1)));
  });
  return out;
}

/** The InfraMachine or MachineRequest a resource belongs to (lifecycle 1.1, 1.2), by key. */
function parentKeyOf(r: Resource): string | undefined {
  const m = r.metadata;
  if (m.namespace === NS_INFRA_PROVIDER) {
    if (m.type === T.InfraMachineStatus) return `${NS_INFRA_PROVIDER}/${T.InfraMachine}/${m.id}`;
    if (m.type === T.MachineRequestStatus) return `${NS_INFRA_PROVIDER}/${T.MachineRequest}/${m.id}`;
    if (m.type === T.ConfigPatchRequest)
      return `${NS_INFRA_PROVIDER}/${T.MachineRequest}/${m.labels[LABEL_MACHINE_REQUEST]}`;
    return undefined;
  }
  if (m.namespace !== NS) return undefined;
  if (PER_MACHINE.includes(m.type)) return `${NS_INFRA_PROVIDER}/${T.InfraMachine}/${m.id}`;
  if (PER_REQUEST.includes(m.type)) return `${NS_INFRA_PROVIDER}/${T.MachineRequest}/${m.id}`;
  return undefined;
}

const isParent = (r: Resource) =>
  (r.metadata.type === T.InfraMachine || r.metadata.type === T.MachineRequest) &&
  r.metadata.labels[LABEL_INFRA_PROVIDER_ID] === ID;

let key: GeneratedKey;
beforeAll(async () => {
  key = await generateKey(`infra-provider:${ID}`, { date: new Date(Date.now() - 3600_000) });
});

describe('positive evidence: whatever Lists leave out or add, nothing of a machine or request in use touched', () => {
  it(
    'never destroys or changes what belongs to an existing machine or request in use, ' +
      'never deregisters while one exists',
    async () => {
      await fc.assert(
        fc.asyncProperty(caseArb, async (c) => {
          const resources = fleet(c);
          const sim = await createSim({
            omniVersion: '1.3.4',
            identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [key.armoredPublicKey] }],
            resources,
            faults: {},
          });
          let lists = 0;
          const proxy = await startTamperProxy(sim.endpoint, (r) => {
            if (r.rpc !== 'List') return undefined;
            const type = (r.body as { type?: string } | undefined)?.type ?? '';
            const odd = lists++ % 2 === 1;
            const withheld = new Set(c.hidden.map((h) => keyOf(resources[h % resources.length]!)));
            return {
              kind: 'lines',
              map: (line, i) => {
                if (c.emptied.includes(type)) return null;
                const res = resultOf(line) as
                  { metadata?: { namespace?: string; type?: string; id?: string } } | undefined;
                const k = res?.metadata ? `${res.metadata.namespace}/${res.metadata.type}/${res.metadata.id}` : '';
                const keep = withheld.has(k) && (!c.flaky || odd) ? [] : [line];
                return i === 0 && c.injected.includes(type) ? ['{"result":{}}', ...keep] : keep;
              },
            };
          });
          try {
            await sim.controllers?.idle();
            const before = sim.store.all();
            // Connections to spare beyond the 4 calls: every watched kind holds one (up to 4 here).
            const client = await createOmniClient({
              endpoint: proxy.endpoint,
              key: key.serviceAccountKey,
              concurrency: 16,
              env: {},
            });
            let deregistered = false;
            try {
              const result = await reconcile(
                { state: client.state, logger: silentLogger(), version: 'test' },
                {
                  providerId: ID,
                  machines: [],
                  profile: 'auto',
                  stateTypes: [],
                  deregister: true,
                  wait: false,
                  timeoutMs: 10_000,
                  omniWaitMs: 2_000,
                  concurrency: 4,
                },
              );
              deregistered = result.deregistered;
            } catch (err) {
              // A List line without a resource is a protocol error once the client refuses it (exit 5):
              // the run stops; what it did until then is checked all the same. Any other failure, or
              // one that is not an error of ours (every one has a stable code), fails the property.
              if (c.injected.length === 0 || typeof (err as { code?: unknown }).code !== 'string') throw err;
            } finally {
              await client.close();
            }
            await sim.controllers?.idle();
            const after = sim.store.all();
            const afterByKey = new Map(after.map((r) => [keyOf(r), r]));
            const inUse = new Set(before.filter((r) => isParent(r) && r.metadata.phase === 'running').map(keyOf));

            // Nothing of a machine or request in use is destroyed or changed, the parent included.
            for (const r of before) {
              const k = keyOf(r);
              if (!inUse.has(k) && !inUse.has(parentKeyOf(r) ?? '')) continue;
              const now = afterByKey.get(k);
              expect(now ? canonical(now) : `${k} destroyed`).toBe(canonical(r));
            }
            // A machine or request released (Omni destroyed it) went after its statuses and state (rule
            // 5), whatever the Lists left out. (ConfigPatchRequests have IDs of their own: a List is all
            // that finds them.)
            for (const r of before) {
              const parent = parentKeyOf(r);
              if (
                r.metadata.type === T.ConfigPatchRequest ||
                !parent ||
                afterByKey.has(parent) ||
                !before.some((p) => keyOf(p) === parent)
              )
                continue;
              expect(afterByKey.has(keyOf(r)) ? `${keyOf(r)} left after its parent went` : 'gone').toBe('gone');
            }
            // Deregistered (the ProviderStatus gone) only with no machine or request of ours left.
            const statusGone = !after.some((r) => r.metadata.type === T.InfraProviderStatus && r.metadata.id === ID);
            if (deregistered || statusGone) {
              expect(inUse.size).toBe(0);
              expect(after.filter(isParent).map(keyOf)).toEqual([]);
            }
            // And the general oracle: no foreign finalizer removed, nothing of others touched, nothing added.
            expect(
              checkRelease(before, after, { providerId: ID, complete: false, deregistered: deregistered || statusGone })
                .problems,
            ).toEqual([]);
          } finally {
            await proxy.close();
            await sim.close();
          }
        }),
        // About 4 s on the CI machine; EVIDENCE_RUNS=300 (about a minute) for a longer search by hand.
        { numRuns: RUNS, endOnFailure: true },
      );
    },
    Math.max(60_000, RUNS * 1_000),
  );
});
