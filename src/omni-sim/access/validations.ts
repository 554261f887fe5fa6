// Omni's validations that a caller of the sim can run into behind the access rules (access.ts):
// a MachineRequest's spec never changes, and (1.4+) an infra provider with running machines cannot
// be torn down or destroyed (docs/omni-lifecycle.md 7.3). Omni runs them, and its role checks, as
// validations of its API state, so a refusal reads "failed to validate: 1 error occurred: ..." with
// a gRPC status's code kept (docs/omni-wire.md 1.5 and 4.6).

import { errorFromStatus, GrpcCode, grpcCodeName, type OmniError } from '../../omni-api/errors.js';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { bytesEqual, LABEL_INFRA_PROVIDER_ID, NS_DEFAULT, PHASE_RUNNING, T } from '../../omni-api/resource.js';
import { decodeSpec, encodeSpec } from '../../omni-api/specs/codec.js';
import { MachineRequestSpec } from '../../omni-api/specs/messages.js';
import { LabelTermOperation } from '../../omni-api/wire.js';
import type { Identity, Query, StateApi } from '../api.js';
import { INTERNAL } from '../api.js';
import { goQuote as q } from '../store/backend.js';
import type { OmniVersion } from '../version.js';
import { atLeast } from '../version.js';

/**
 * Omni's `validated` state error: "failed to validate: " + a one-entry go-multierror list. A plain
 * error is InvalidArgument; a gRPC status error keeps its code and is listed as gRPC prints it.
 */
export function validationError(e: string | OmniError): OmniError {
  const entry = typeof e === 'string' ? e : `rpc error: code = ${grpcCodeName(e.grpcCode)} desc = ${e.omniMessage}`;
  return errorFromStatus(
    typeof e === 'string' ? GrpcCode.InvalidArgument : e.grpcCode,
    `failed to validate: 1 error occurred:\n\t* ${entry}\n\n`,
  );
}

/**
 * Omni's validation (1.4+, docs/omni-lifecycle.md 7.3): no tearing down or destroying a provider with Running machines.
 */
export function checkProviderDeletable(inner: StateApi, v: OmniVersion, p: Pointer, who: Identity): void {
  if (who.internal || p.type !== T.InfraProvider || !atLeast(v, '1.4')) return;
  if (!inner.view(p)) return;
  const query: Query = {
    labelQueries: [[{ key: LABEL_INFRA_PROVIDER_ID, op: LabelTermOperation.EQUAL, value: [p.id], invert: false }]],
    idRegexp: '',
  };
  const running = inner
    .list(INTERNAL, NS_DEFAULT, T.Machine, query)
    .filter((m) => m.metadata.phase === PHASE_RUNNING)
    .map((m) => m.metadata.id);
  if (running.length > 0) {
    throw validationError(
      `cannot delete the infra provider ${q(p.id)}, as there are ${running.length} running machines managed by it: ` +
        `[${running.join(' ')}]`,
    );
  }
}

/**
 * Omni's validation (docs/omni-behaviour.md 'Errors'): a MachineRequest's spec never changes (compared as
 * decoded messages, unknown fields included).
 */
export function checkMachineRequestImmutable(old: Resource, next: Resource): void {
  if (old.metadata.type !== T.MachineRequest) return;
  const canon = (b: Uint8Array): Uint8Array => {
    try {
      const d = decodeSpec(MachineRequestSpec, b);
      return encodeSpec(MachineRequestSpec, d.value, d.unknown);
    } catch {
      return b;
    }
  };
  if (!bytesEqual(canon(old.spec.protoSpec), canon(next.spec.protoSpec)))
    throw validationError('machine request spec is immutable');
}
