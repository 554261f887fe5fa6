// Design rule 6 for new MachineRequests in whole-provider mode: a MachineRequestStatus with stage
// FAILED and an error naming the reason, owned by `<id>.ProvisionController` (the planned Create).
// Each refusal is written once per run, and reported as ours: what this run wrote is told to its
// caches and never written again; a status found in its place (AlreadyExists) is read and
// attributed by its content (our marker), never assumed.

import type { Logger } from 'pino';
import type { Pointer } from '../../omni-api/resource.js';
import { newMetadata } from '../../omni-api/resource.js';
import { escapeControl } from '../../omni-api/untrusted.js';
import { getIfExists } from '../../omni-client/read.js';
import type { State } from '../../omni-api/state.js';
import { hasCode } from '../../omni-client/errors.js';
import { MachineRequestStage, MachineRequestStatusSpec } from '../../omni-api/specs/messages.js';
import { encodeSpec } from '../../omni-api/specs/codec.js';
import type { Outcomes } from './outcomes.js';
import type { Refusal } from '../plan/plan.js';
import { isStubRefusal, STUB_MARKER } from '../plan/facts.js';
import type { Reads } from '../read/reads.js';

export function refusalError(providerId: string, requestId: string): string {
  return (
    `${STUB_MARKER}: provider ${providerId} is being decommissioned and accepts no new machines; request ` +
    `${requestId} is refused`
  );
}

export interface RefuseDeps {
  state: State;
  providerId: string;
  outcomes: Outcomes;
  log: Logger;
  signal?: AbortSignal;
  /** The run's caches: told of the status this run wrote, so that the next pass plans it refused (done). */
  reads: Pick<Reads, 'observe'>;
  /** The refusals this run wrote (by key): never written again, whatever a pass plans. */
  refused: Set<string>;
  /** No Create at or after this time (CallOptions.notAfter): --timeout. */
  notAfter?: number;
}

export async function refuse(d: RefuseDeps, r: Refusal): Promise<void> {
  const key = `${r.kind}/${r.id}`;
  const out = d.outcomes;
  // Written by this run already: a pass whose caches had not yet seen it plans it again.
  if (d.refused.has(key)) return;
  if (r.done || !r.request || !r.op) {
    if (!out.refusals.has(key))
      out.refusal(key, {
        kind: r.kind,
        id: r.id,
        reason: r.reason,
        result: r.kind === 'InfraMachine' ? 'no-finalizers' : 'already-refused',
      });
    return;
  }
  const op = r.op;
  const md = newMetadata(op.target, { labels: { ...r.request.metadata.labels } });
  const spec = encodeSpec(MachineRequestStatusSpec, {
    id: '',
    stage: MachineRequestStage.FAILED,
    error: refusalError(d.providerId, r.id),
    status: `refused by ${STUB_MARKER}`,
  });
  try {
    const created = await d.state.create(
      { metadata: md, spec: { protoSpec: spec } },
      { owner: op.owner, ...(d.signal ? { signal: d.signal } : {}), ...(d.notAfter ? { notAfter: d.notAfter } : {}) },
    );
    d.refused.add(key);
    // Omni's answer is what it now holds (a write of this run that succeeded: positive evidence).
    d.reads.observe(created);
    refused(d, r, key);
  } catch (err) {
    if (hasCode(err, 'OMNI_ALREADY_EXISTS')) return attribute(d, r, key, op.target);
    // Not sent: --timeout passed first; the plan made then reports it as left (deadline.ts).
    if (hasCode(err, 'STUB_DEADLINE')) return;
    // Interrupted, or a write no run can get past (the run stops): not this refusal's failure.
    if (d.signal?.aborted || hasCode(err, 'STUB_WRITE_TOO_LARGE')) throw err;
    failed(d, r, key, (err as Error).message);
  }
}

function refused(d: RefuseDeps, r: Refusal, key: string): void {
  d.outcomes.itemLog('info', { kind: r.kind, id: r.id }, 'refused new MachineRequest (FAILED status)');
  d.outcomes.refusal(
    key,
    { kind: r.kind, id: r.id, reason: r.reason, result: 'refused' },
    { kind: r.kind, id: r.id, status: 'refused' },
  );
}

function failed(d: RefuseDeps, r: Refusal, key: string, message: string): void {
  d.outcomes.itemLog('error', { kind: r.kind, id: r.id, err: message }, 'refusal failed');
  d.outcomes.refusal(
    key,
    { kind: r.kind, id: r.id, reason: r.reason, result: 'failed', error: message },
    { kind: r.kind, id: r.id, status: 'failed', reason: `refusal failed: ${message}` },
  );
}

/**
 * A status appeared between the plan and the Create (AlreadyExists): read it by its ID and say whose it is, by its
 * content: ours (our marker: this run's, or an earlier run's), or someone else's (the provider may be back).
 */
async function attribute(d: RefuseDeps, r: Refusal, key: string, target: Pointer): Promise<void> {
  const status = await getIfExists(d.state, target, { signal: d.signal });
  if (!status) {
    failed(d, r, key, 'a status appeared meanwhile and was destroyed before it could be read; run again');
    return;
  }
  d.reads.observe(status);
  if (isStubRefusal(status)) {
    d.outcomes.refusal(key, {
      kind: r.kind,
      id: r.id,
      reason: 'refused by an earlier run of stub-provider (FAILED status written by stub-provider)',
      result: 'already-refused',
    });
    return;
  }
  const owner = escapeControl(status.metadata.owner || '(no owner)');
  d.outcomes.itemLog(
    'warn',
    { kind: r.kind, id: r.id, owner: status.metadata.owner },
    'a status written by someone else appeared meanwhile: left alone',
  );
  d.outcomes.refusal(key, {
    kind: r.kind,
    id: r.id,
    reason: `a status written by ${owner} appeared meanwhile (is the provider back?): left alone`,
    result: 'status-by-other',
  });
}
