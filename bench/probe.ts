// The benchmark's transport probes: what the client and the sim carry, and what a signed call costs
// the client, with none of the stub's logic (no caches, plan, executor, audit or report).
//
// - The Get probe (`probeTransport`): signed Gets of a resource with an empty spec at the stub's
//   concurrency: the calls per second the transport carries (the ceiling of the stub's wall time).
// - The mix probe (`probeMix`): against a sim of its own, the calls the stub makes, straight through
//   the client: per bare-metal machine 2 Updates removing a finalizer, 6 Destroys and 1 Update, per
//   MachineRequest a Get and an Update tearing its status down, 2 Destroys and 1 Update, the same
//   resources and bodies (the stub sends back what it read, without the YAML Omni renders for its own
//   types), and one List of each kind they are read from. It runs in a process of its own
//   (bench/mix-client.ts), measured as the stub's is; its CPU per call is the floor of the stub's: what
//   the same signed calls cost without the stub. The stub's Watches are not in it (a client needs none
//   to make these calls; what they cost is the caches').

import type { Pointer, Resource } from '../src/omni-api/resource.js';
import { NS_INFRA_PROVIDER, providerNamespace, providerType, T } from '../src/omni-api/resource.js';
import type { State } from '../src/omni-api/state.js';
import { OMNI_SPEC_SCHEMAS } from '../src/omni-api/specs/specs.js';
import { createOmniClient } from '../src/omni-client/client.js';
import { machineUuid } from '../src/omni-sim/scenario/generate.js';

/** The probe's calls not counted (warming the JITs up), and the fewest it counts. */
const PROBE_WARM_CALLS = 2_000;
const PROBE_MIN_CALLS = 10_000;

/** What a probe measured: calls per second, and its client's CPU per signed call (this process). */
export interface Probe {
  callsPerS: number;
  clientCpuUsPerCall: number;
}

/**
 * What this machine's loopback, Node's HTTP stack and the sim can carry with one HTTP request per
 * call: read-only Gets (signed, verified, with the same latency) at the same concurrency; and what
 * one such call costs the client (signature, HTTP, JSON, the answer decoded and checked; no stub
 * logic).
 */
export async function probeTransport(endpoint: string, key: string, concurrency: number, ms: number): Promise<Probe> {
  const client = await createOmniClient({ endpoint, key, concurrency });
  // A provider-namespace resource with an empty spec: the probe measures the round trip, not the
  // sim's YAML rendering of Omni's specs.
  const p = { namespace: providerNamespace('bench'), type: providerType('RebootStatus', 'bench'), id: machineUuid(0) };
  // The first fifth of the time (and at least PROBE_WARM_CALLS calls) warms both JITs up and is not
  // counted (as bare_http): a cold probe measured a fraction of what the stub itself then reached, a
  // ceiling below the run, and its CPU per call was mostly the JIT's. The counted part lasts until
  // `ms` has passed and at least PROBE_MIN_CALLS calls were counted (at most ten times `ms`), so that a
  // loaded machine still gives a CPU per call over enough calls.
  const start = performance.now();
  const warmUntil = start + ms / 5;
  let calls = 0;
  let n = 0;
  let t0 = 0;
  let cpu0: NodeJS.CpuUsage | undefined;
  let cpu: NodeJS.CpuUsage | undefined;
  const counting = (): boolean => {
    const now = performance.now();
    return now - start < ms || (n < PROBE_MIN_CALLS && now - start < 10 * ms);
  };
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (counting()) {
          await client.state.get(p);
          calls++;
          if (performance.now() < warmUntil || calls < PROBE_WARM_CALLS) continue;
          if (t0 === 0) {
            t0 = performance.now();
            cpu0 = process.cpuUsage();
          }
          n++;
        }
      }),
    );
    cpu = process.cpuUsage(cpu0);
  } finally {
    await client.close();
  }
  const used = cpu ? cpu.user + cpu.system : 0;
  return { callsPerS: (n * 1000) / (performance.now() - (t0 || start)), clientCpuUsPerCall: used / Math.max(1, n) };
}

/** Destroys of a request's status retried while Omni's cleanup controller still holds it, at most. */
const STATUS_TRIES = 200;

/** The kinds one item's calls read and write, as the bench provider's scenario has them. */
function kinds(providerId: string): Record<string, { namespace: string; type: string }> {
  const ns = providerNamespace(providerId);
  const own = (name: string) => ({ namespace: ns, type: providerType(name, providerId) });
  return {
    infraMachine: { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine },
    infraMachineStatus: { namespace: NS_INFRA_PROVIDER, type: T.InfraMachineStatus },
    machineStatus: own('MachineStatus'),
    bmcConfiguration: own('BMCConfiguration'),
    powerOperation: own('PowerOperation'),
    rebootStatus: own('RebootStatus'),
    wipeStatus: own('WipeStatus'),
    request: { namespace: NS_INFRA_PROVIDER, type: T.MachineRequest },
    requestStatus: { namespace: NS_INFRA_PROVIDER, type: T.MachineRequestStatus },
    requestState: own('Machine'),
  };
}

type Listed = Record<string, Map<string, Resource>>;

async function listAll(state: State, providerId: string): Promise<Listed> {
  const out: Listed = {};
  await Promise.all(
    Object.entries(kinds(providerId)).map(async ([k, { namespace, type }]) => {
      // What the stub sends back: the spec bytes, without the YAML Omni renders for its own types.
      const rs = await state.list(namespace, type);
      for (const r of rs) if (OMNI_SPEC_SCHEMAS.has(r.metadata.type)) delete r.spec.yamlSpec;
      out[k] = new Map(rs.map((r) => [r.metadata.id, r]));
    }),
  );
  return out;
}

const pointer = (r: Resource): Pointer => ({
  namespace: r.metadata.namespace,
  type: r.metadata.type,
  id: r.metadata.id,
});

async function releaseMachine(state: State, l: Listed, id: string): Promise<void> {
  const get = (k: string) => l[k]?.get(id);
  for (const k of ['machineStatus', 'bmcConfiguration']) {
    const r = get(k);
    if (r) await state.removeFinalizers(r, [...r.metadata.finalizers]);
  }
  for (const k of ['machineStatus', 'bmcConfiguration', 'powerOperation', 'rebootStatus', 'wipeStatus']) {
    const r = get(k);
    if (r) await state.destroy(pointer(r), { owner: r.metadata.owner });
  }
  const status = get('infraMachineStatus');
  if (status) await state.destroy(pointer(status), { owner: status.metadata.owner });
  const im = get('infraMachine');
  if (im) await state.removeFinalizers(im, [...im.metadata.finalizers]);
}

async function releaseRequest(state: State, l: Listed, id: string, providerId: string): Promise<void> {
  const get = (k: string) => l[k]?.get(id);
  const status = get('requestStatus');
  if (status) await state.teardown(pointer(status));
  const st = get('requestState');
  if (st) await state.destroy(pointer(st), { owner: st.metadata.owner });
  const req = get('request');
  if (req) await state.removeFinalizers(req, [`${providerId}.ProvisionController`]);
  // Omni's cleanup controller lets go of the status once it is torn down (the stub waits for that on
  // its watch; the probe tries again a few milliseconds later).
  for (let i = 0; status && i < STATUS_TRIES; i++) {
    try {
      await state.destroy(pointer(status), { owner: status.metadata.owner });
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

/** Runs `work` on each of `ids` with `concurrency` of them at once. */
async function eachOf(ids: string[], concurrency: number, work: (id: string) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < ids.length) await work(ids[next++]!);
    }),
  );
}

/**
 * The stub's calls without the stub: one List of each kind, then the releases of every machine and
 * request, `concurrency` items at once. Run in a process of its own (bench/mix-client.ts), whose CPU
 * is measured as the stub's is: all of it, loading and Lists included.
 */
export async function probeMix(
  endpoint: string,
  key: string,
  concurrency: number,
  providerId = 'bench',
): Promise<void> {
  const client = await createOmniClient({ endpoint, key, concurrency });
  const state = client.state;
  try {
    const listed = await listAll(state, providerId);
    const machines = [...(listed['infraMachine']?.keys() ?? [])];
    const requests = [...(listed['request']?.keys() ?? [])];
    await eachOf(machines, concurrency, (id) => releaseMachine(state, listed, id));
    await eachOf(requests, concurrency, (id) => releaseRequest(state, listed, id, providerId));
  } finally {
    await client.close();
  }
}
