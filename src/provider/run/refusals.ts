// Design rule 6 for new MachineRequests in whole-provider mode: a MachineRequestStatus with stage
// FAILED and an error naming the reason, owned by `<id>.ProvisionController` (the planned Create).

import type { Logger } from 'pino';
import { newMetadata } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { hasCode } from '../../omni-client/errors.js';
import { MachineRequestStage, MachineRequestStatusSpec } from '../../omni-api/specs/messages.js';
import { encodeSpec } from '../../omni-api/specs/codec.js';
import type { Outcomes } from './outcomes.js';
import type { Refusal } from '../plan/plan.js';
import { STUB_MARKER } from '../plan/facts.js';

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
}

export async function refuse(d: RefuseDeps, r: Refusal): Promise<void> {
  const key = `${r.kind}/${r.id}`;
  const out = d.outcomes;
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
    await d.state.create({ metadata: md, spec: { protoSpec: spec } }, { owner: op.owner, signal: d.signal });
    out.itemLog('info', { kind: r.kind, id: r.id }, 'refused new MachineRequest (FAILED status)');
    out.refusal(
      key,
      { kind: r.kind, id: r.id, reason: r.reason, result: 'refused' },
      { kind: r.kind, id: r.id, status: 'refused' },
    );
  } catch (err) {
    if (hasCode(err, 'OMNI_ALREADY_EXISTS')) {
      out.refusal(key, { kind: r.kind, id: r.id, reason: 'a status appeared meanwhile', result: 'already-refused' });
      return;
    }
    if (d.signal?.aborted) throw err;
    const message = (err as Error).message;
    out.itemLog('error', { kind: r.kind, id: r.id, err: message }, 'refusal failed');
    out.refusal(
      key,
      { kind: r.kind, id: r.id, reason: r.reason, result: 'failed', error: message },
      { kind: r.kind, id: r.id, status: 'failed', reason: `refusal failed: ${message}` },
    );
  }
}
