// One NDJSON line per mutation (`--audit-log`): which resource, finalizers and versions before and
// after, and the result. Only metadata is recorded, never a spec, so no secret can reach the file.

import type { Pointer, Resource } from '../omni-client/resource.js';

export type AuditOp = 'create' | 'update' | 'teardown' | 'destroy';
export type AuditResult = 'ok' | 'gone' | 'absent' | 'exists' | 'error';

export interface AuditEntry {
  time: string;
  op: AuditOp;
  resource: Pointer;
  owner?: string;
  finalizersBefore?: string[];
  finalizersAfter?: string[];
  versionBefore?: string;
  versionAfter?: string;
  phaseBefore?: string;
  phaseAfter?: string;
  result: AuditResult;
  error?: string;
}

export class Audit {
  /** Mutations by op and result, for the report. */
  readonly counts: Record<string, number> = {};

  constructor(private readonly sink?: (line: string) => void, private readonly now: () => number = Date.now) {}

  mutation(op: AuditOp, p: Pointer, before: Resource | undefined, after: Resource | undefined, result: AuditResult, error?: string): void {
    const k = `${op}:${result}`;
    this.counts[k] = (this.counts[k] ?? 0) + 1;
    if (!this.sink) return;
    const e: AuditEntry = {
      time: new Date(this.now()).toISOString(),
      op,
      resource: { namespace: p.namespace, type: p.type, id: p.id },
      ...(before ? { owner: before.metadata.owner, finalizersBefore: before.metadata.finalizers, versionBefore: before.metadata.version, phaseBefore: before.metadata.phase } : {}),
      ...(after ? { finalizersAfter: after.metadata.finalizers, versionAfter: after.metadata.version, phaseAfter: after.metadata.phase } : {}),
      result,
      ...(error ? { error } : {}),
    };
    this.sink(`${JSON.stringify(e)}\n`);
  }

  /** Mutations that changed something in Omni. */
  get writes(): number {
    return Object.entries(this.counts).filter(([k]) => k.endsWith(':ok')).reduce((a, [, v]) => a + v, 0);
  }
}
