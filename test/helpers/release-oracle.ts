// An independent oracle of what a stub run may change in Omni, used by the fault suite and the
// end-to-end safety properties. It does not import src/provider: ownership is re-derived here from
// docs/design.md rule 1 so that a bug there cannot hide itself.
//
// Given the state before and after (every resource), it checks:
//   - no finalizer was added anywhere, no foreign finalizer removed from a resource that still exists;
//   - every resource that is not one the stub may act on is byte-identical (version included) or was
//     destroyed by Omni's own controllers for a reason the oracle names;
//   - nothing of another provider and no running machine (or its outputs) changed;
//   - with `complete`: none of our finalizers is left on a tearing-down resource, and the outputs of
//     every released machine or request are gone.

import type { Resource } from '../../src/omni-api/resource.js';
import { T } from '../../src/omni-api/resource.js';

const LABEL = 'omni.sidero.dev/infra-provider-id';
const REQUEST_LABEL = 'omni.sidero.dev/machine-request';

export const keyOf = (r: Resource) => `${r.metadata.namespace}/${r.metadata.type}/${r.metadata.id}`;

/** Everything of a resource as a string: metadata and spec bytes. */
export function canonical(r: Resource): string {
  const m = r.metadata;
  return JSON.stringify([
    m.namespace,
    m.type,
    m.id,
    m.version,
    m.owner,
    m.phase,
    m.created ?? null,
    m.updated ?? null,
    [...m.finalizers],
    Object.entries(m.labels).sort(),
    Object.entries(m.annotations).sort(),
    Buffer.from(r.spec.protoSpec).toString('base64'),
    r.spec.yamlSpec ?? null,
  ]);
}

/** Rule 1, written out again: `<id>.<Name>`, Name non-empty without a dot, on a resource of ours. */
export function isOursFinalizer(f: string, id: string): boolean {
  if (!f.startsWith(`${id}.`)) return false;
  const name = f.slice(id.length + 1);
  return name !== '' && !name.includes('.');
}

export function isOursResource(r: Resource, id: string): boolean {
  return (
    r.metadata.namespace === `infra-provider:${id}` ||
    (Object.hasOwn(r.metadata.labels, LABEL) && r.metadata.labels[LABEL] === id)
  );
}

export function ourFinalizersOf(r: Resource, id: string): string[] {
  return isOursResource(r, id) ? r.metadata.finalizers.filter((f) => isOursFinalizer(f, id)) : [];
}

/** Parents the stub releases: our InfraMachines and MachineRequests being torn down. */
export function isReleasableParent(r: Resource, id: string): boolean {
  const t = r.metadata.type;
  return (
    (t === T.InfraMachine || t === T.MachineRequest) &&
    r.metadata.namespace === 'infra-provider' &&
    r.metadata.phase === 'tearingDown' &&
    isOursResource(r, id)
  );
}

export interface OracleOptions {
  providerId: string;
  /** All work done (not interrupted): nothing of ours left on tearing-down resources. */
  complete: boolean;
  /** The run deregistered the provider (everything of ours may be gone). */
  deregistered?: boolean;
  /** Per-machine mode: only these parents (and their outputs) may change. */
  machines?: string[];
}

export interface OracleResult {
  problems: string[];
}

export function checkRelease(before: Resource[], after: Resource[], o: OracleOptions): OracleResult {
  const id = o.providerId;
  const problems: string[] = [];
  const b = new Map(before.map((r) => [keyOf(r), r]));
  const a = new Map(after.map((r) => [keyOf(r), r]));
  const parents = before.filter(
    (r) => isReleasableParent(r, id) && (!o.machines || o.machines.includes(r.metadata.id)),
  );
  const parentIds = new Set(parents.map((r) => r.metadata.id));
  const runningParentIds = new Set(
    before
      .filter(
        (r) =>
          (r.metadata.type === T.InfraMachine || r.metadata.type === T.MachineRequest) &&
          r.metadata.phase === 'running',
      )
      .map((r) => r.metadata.id),
  );
  const ns = `infra-provider:${id}`;

  /** An output of a released parent: its status, its state in our namespace, its config patch requests. */
  const isOutput = (r: Resource): boolean => {
    const m = r.metadata;
    if (m.namespace === ns) return parentIds.has(m.id) && !runningParentIds.has(m.id);
    if (!isOursResource(r, id)) return false;
    if (m.type === T.InfraMachineStatus || m.type === T.MachineRequestStatus)
      return parentIds.has(m.id) && !runningParentIds.has(m.id);
    if (m.type === T.ConfigPatchRequest) return parentIds.has(m.labels[REQUEST_LABEL] ?? '');
    return false;
  };
  const isProviderWide = (r: Resource) =>
    (r.metadata.type === T.InfraProviderStatus || r.metadata.type === T.InfraProviderHealthStatus) &&
    r.metadata.id === id;

  for (const [k, rb] of b) {
    const ra = a.get(k);
    if (ra) {
      // Finalizers: never added (Omni's controllers add theirs only to running resources they own,
      // which our scenarios seed already), foreign ones never removed.
      const added = ra.metadata.finalizers.filter((f) => !rb.metadata.finalizers.includes(f));
      if (added.length > 0 && !isProviderWide(rb)) problems.push(`${k}: finalizers added: ${added.join(', ')}`);
    }
    if (isProviderWide(rb)) {
      if (o.machines && (!ra || canonical(ra) !== canonical(rb))) problems.push(`${k}: changed in per-machine mode`);
      if (!ra && !o.deregistered) problems.push(`${k}: destroyed without a deregistration`);
      if (ra && rb.metadata.type === T.InfraProviderStatus) {
        for (const [lk, lv] of Object.entries(rb.metadata.labels)) {
          if (ra.metadata.labels[lk] !== lv) problems.push(`${k}: label ${lk} lost or changed`);
        }
      }
      continue;
    }
    const parent = parentIds.has(rb.metadata.id) && parents.some((p) => keyOf(p) === k);
    if (parent) {
      const foreign = rb.metadata.finalizers.filter((f) => !ourFinalizersOf(rb, id).includes(f));
      if (!ra) {
        if (foreign.length > 0 && !isOmniCleared(rb, foreign))
          problems.push(`${k}: gone although ${foreign.join(', ')} held it`);
        continue;
      }
      if (o.complete && ourFinalizersOf(ra, id).length > 0)
        problems.push(`${k}: our finalizers left: ${ourFinalizersOf(ra, id).join(', ')}`);
      const lost = foreign.filter((f) => !ra.metadata.finalizers.includes(f) && !isOmniCleared(rb, [f]));
      if (lost.length > 0) problems.push(`${k}: foreign finalizers removed: ${lost.join(', ')}`);
      if (!sameExceptFinalizers(rb, ra)) problems.push(`${k}: changed beyond its finalizers`);
      continue;
    }
    const output = isOutput(rb);
    const perItem =
      rb.metadata.namespace === ns ||
      (isOursResource(rb, id) &&
        [T.InfraMachineStatus, T.MachineRequestStatus, T.ConfigPatchRequest].includes(rb.metadata.type as never));
    // Whole-provider mode cleans what the provider left behind: outputs whose machine or request is gone.
    const parentOf =
      rb.metadata.type === T.ConfigPatchRequest ? (rb.metadata.labels[REQUEST_LABEL] ?? '') : rb.metadata.id;
    const orphan =
      !o.machines &&
      perItem &&
      !before.some(
        (p) =>
          (p.metadata.type === T.InfraMachine || p.metadata.type === T.MachineRequest) && p.metadata.id === parentOf,
      );
    const leftover = (o.deregistered === true && perItem) || orphan;
    if (output || leftover) {
      const mine = ourFinalizersOf(rb, id);
      const foreign = rb.metadata.finalizers.filter((f) => !mine.includes(f));
      if (!ra) {
        if (foreign.length > 0 && !isOmniCleared(rb, foreign))
          problems.push(`${k}: gone although ${foreign.join(', ')} held it`);
        continue;
      }
      if (output && o.complete && isOmniCleared(rb, foreign))
        problems.push(`${k}: output of a released item still there`);
      const lost = foreign.filter((f) => !ra.metadata.finalizers.includes(f) && !isOmniCleared(rb, [f]));
      if (lost.length > 0) problems.push(`${k}: foreign finalizers removed: ${lost.join(', ')}`);
      if (!sameExceptFinalizers(rb, ra, true)) problems.push(`${k}: changed beyond its finalizers and phase`);
      continue;
    }
    if (!ra) {
      problems.push(`${k}: destroyed although the stub may not act on it`);
      continue;
    }
    if (canonical(ra) !== canonical(rb)) problems.push(`${k}: changed although the stub may not act on it`);
  }
  for (const [k, ra] of a) {
    if (b.has(k)) continue;
    const ok =
      !o.machines &&
      ((isProviderWide(ra) && ra.metadata.type === T.InfraProviderHealthStatus) ||
        (ra.metadata.type === T.MachineRequestStatus && isOursResource(ra, id))); // a refusal
    if (!ok) problems.push(`${k}: created`);
  }
  if (o.complete) {
    for (const ra of after) {
      if (
        ra.metadata.phase === 'tearingDown' &&
        ourFinalizersOf(ra, id).length > 0 &&
        (!o.machines || o.machines.includes(ra.metadata.id))
      ) {
        problems.push(`${keyOf(ra)}: tearing down with our finalizers left: ${ourFinalizersOf(ra, id).join(', ')}`);
      }
    }
  }
  return { problems };
}

/** Omni's own cleanup finalizers that the sim's controllers clear once the resource is torn down. */
function isOmniCleared(r: Resource, fs: string[]): boolean {
  const cleared: Record<string, string[]> = {
    [T.MachineRequestStatus]: ['MachineRequestStatusCleanupController'],
    [T.MachineRequest]: ['MachineRequestSetStatusController', 'ClusterMachineRequestStatusController'],
    [T.ConfigPatchRequest]: ['ConfigPatchRequestController'],
  };
  const ok = cleared[r.metadata.type] ?? [];
  return fs.every((f) => ok.includes(f));
}

function sameExceptFinalizers(x: Resource, y: Resource, phaseMayChange = false): boolean {
  const strip = (r: Resource) =>
    canonical({
      metadata: {
        ...r.metadata,
        finalizers: [],
        version: '',
        updated: '',
        ...(phaseMayChange ? { phase: 'running' as const } : {}),
      },
      spec: r.spec,
    });
  return strip(x) === strip(y);
}
