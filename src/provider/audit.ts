// One NDJSON line per mutation (`--audit-log`): which resource, finalizers and versions before and
// after, and the result. Only metadata is recorded, never a spec, so no secret can reach the file.
// Every mutation also makes one info log line naming the resource (issue 4 item 8), here, so that no
// call site can forget it; cheap enough for tens of thousands (a few strings, no spec rendering).

import type { Logger } from 'pino';
import type { Pointer, Resource } from '../omni-client/resource.js';
import { describePointer } from '../omni-client/resource.js';

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

  /** Where the one log line per mutation goes (reconcile sets its logger when none was given). */
  logger: Logger | undefined;

  constructor(private readonly sink?: (line: string) => void, private readonly now: () => number = Date.now, logger?: Logger) {
    this.logger = logger;
  }

  mutation(op: AuditOp, p: Pointer, before: Resource | undefined, after: Resource | undefined, result: AuditResult, error?: string): void {
    const k = `${op}:${result}`;
    this.counts[k] = (this.counts[k] ?? 0) + 1;
    this.log(op, p, before, after, result, error);
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

  private log(op: AuditOp, p: Pointer, before: Resource | undefined, after: Resource | undefined, result: AuditResult, error: string | undefined): void {
    const log = this.logger;
    if (!log?.isLevelEnabled('info')) return;
    const removed = op === 'update' && before && after ? before.metadata.finalizers.filter((f) => !after.metadata.finalizers.includes(f)) : [];
    log.info({
      op,
      resource: describePointer(p),
      ...(removed.length > 0 ? { finalizersRemoved: removed } : {}),
      ...(after ? { version: after.metadata.version } : {}),
      ...(result !== 'ok' ? { result } : {}),
      ...(error ? { err: error } : {}),
    }, MESSAGES[op]);
  }

  /** Mutations that changed something in Omni. */
  get writes(): number {
    return Object.entries(this.counts).filter(([k]) => k.endsWith(':ok')).reduce((a, [, v]) => a + v, 0);
  }
}

const MESSAGES: Record<AuditOp, string> = { create: 'created', update: 'updated', teardown: 'tore down', destroy: 'destroyed' };
