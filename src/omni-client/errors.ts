// Typed errors with stable `code` strings (one per gRPC code), in the style of undici's errors.
// Callers decide from the code plus context (which method, what they sent): Omni uses one gRPC code
// for several conditions (PermissionDenied is both "access refused" and "owner conflict").

import type { Pointer } from './resource.js';
import { describePointer } from './resource.js';
import { escapeControl } from '../untrusted.js';

export const GrpcCode = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const;
export type GrpcCodeName = keyof typeof GrpcCode;
export type GrpcCodeNumber = (typeof GrpcCode)[GrpcCodeName];

const NAME_BY_NUMBER = new Map<number, GrpcCodeName>(
  Object.entries(GrpcCode).map(([k, v]) => [v, k as GrpcCodeName]),
);

export function grpcCodeName(code: number): GrpcCodeName {
  return NAME_BY_NUMBER.get(code) ?? 'Unknown';
}

/** grpc-gateway's runtime.HTTPStatusFromCode (omni-wire.md 1.3). */
export function httpStatusFromGrpcCode(code: number): number {
  switch (code) {
    case GrpcCode.OK: return 200;
    case GrpcCode.Canceled: return 499;
    case GrpcCode.Unknown: return 500;
    case GrpcCode.InvalidArgument: return 400;
    case GrpcCode.DeadlineExceeded: return 504;
    case GrpcCode.NotFound: return 404;
    case GrpcCode.AlreadyExists: return 409;
    case GrpcCode.PermissionDenied: return 403;
    case GrpcCode.ResourceExhausted: return 429;
    case GrpcCode.FailedPrecondition: return 400;
    case GrpcCode.Aborted: return 409;
    case GrpcCode.OutOfRange: return 400;
    case GrpcCode.Unimplemented: return 501;
    case GrpcCode.Internal: return 500;
    case GrpcCode.Unavailable: return 503;
    case GrpcCode.DataLoss: return 500;
    case GrpcCode.Unauthenticated: return 401;
    default: return 500;
  }
}

export interface OmniErrorContext {
  /** The gRPC method, e.g. `/cosi.resource.State/Update`. */
  method?: string;
  resource?: Pointer;
  httpStatus?: number;
  cause?: unknown;
}

/** Base of every error the client raises. `code` is stable; `message` keeps Omni's own text, escaped. */
export class OmniError extends Error {
  readonly code: string = 'OMNI_ERR';
  readonly grpcCode: number;
  readonly omniMessage: string;
  readonly method: string | undefined;
  readonly resource: Pointer | undefined;
  readonly httpStatus: number | undefined;

  constructor(grpcCode: number, omniMessage: string, ctx: OmniErrorContext = {}) {
    const where = [ctx.method, ctx.resource ? describePointer(ctx.resource) : undefined].filter(Boolean).join(' ');
    // Omni's message (and an ID read from Omni) may hold control characters: inert in `message`,
    // as sent in `omniMessage`.
    super(escapeControl(`${where ? `${where}: ` : ''}${grpcCodeName(grpcCode)}: ${omniMessage}`), ctx.cause !== undefined ? { cause: ctx.cause } : undefined);
    this.name = new.target.name;
    this.grpcCode = grpcCode;
    this.omniMessage = omniMessage;
    this.method = ctx.method;
    this.resource = ctx.resource;
    this.httpStatus = ctx.httpStatus;
  }
}

function codeClass<const C extends string>(code: C, grpc: number) {
  return class extends OmniError {
    static readonly CODE = code;
    static readonly GRPC = grpc;
    override readonly code: C = code;
    constructor(omniMessage: string, ctx: OmniErrorContext = {}) {
      super(grpc, omniMessage, ctx);
    }
  };
}

export class CanceledError extends codeClass('OMNI_CANCELED', GrpcCode.Canceled) {}
export class UnknownError extends codeClass('OMNI_UNKNOWN', GrpcCode.Unknown) {}
/** A phase conflict on Update, or a validation failure. */
export class InvalidArgumentError extends codeClass('OMNI_INVALID_ARGUMENT', GrpcCode.InvalidArgument) {}
export class DeadlineExceededError extends codeClass('OMNI_DEADLINE_EXCEEDED', GrpcCode.DeadlineExceeded) {}
export class NotFoundError extends codeClass('OMNI_NOT_FOUND', GrpcCode.NotFound) {}
export class AlreadyExistsError extends codeClass('OMNI_ALREADY_EXISTS', GrpcCode.AlreadyExists) {}
/** Access refused, or an owner conflict: Omni uses the same code for both. */
export class PermissionDeniedError extends codeClass('OMNI_PERMISSION_DENIED', GrpcCode.PermissionDenied) {}
export class ResourceExhaustedError extends codeClass('OMNI_RESOURCE_EXHAUSTED', GrpcCode.ResourceExhausted) {}
/** A version conflict on Update, pending finalizers on Destroy, or a refused watch bookmark. */
export class FailedPreconditionError extends codeClass('OMNI_FAILED_PRECONDITION', GrpcCode.FailedPrecondition) {}
export class AbortedError extends codeClass('OMNI_ABORTED', GrpcCode.Aborted) {}
export class OutOfRangeError extends codeClass('OMNI_OUT_OF_RANGE', GrpcCode.OutOfRange) {}
export class UnimplementedError extends codeClass('OMNI_UNIMPLEMENTED', GrpcCode.Unimplemented) {}
export class InternalError extends codeClass('OMNI_INTERNAL', GrpcCode.Internal) {}
export class UnavailableError extends codeClass('OMNI_UNAVAILABLE', GrpcCode.Unavailable) {}
export class DataLossError extends codeClass('OMNI_DATA_LOSS', GrpcCode.DataLoss) {}
export class UnauthenticatedError extends codeClass('OMNI_UNAUTHENTICATED', GrpcCode.Unauthenticated) {}

const CLASS_BY_GRPC = new Map<number, new (m: string, c?: OmniErrorContext) => OmniError>([
  [GrpcCode.Canceled, CanceledError],
  [GrpcCode.Unknown, UnknownError],
  [GrpcCode.InvalidArgument, InvalidArgumentError],
  [GrpcCode.DeadlineExceeded, DeadlineExceededError],
  [GrpcCode.NotFound, NotFoundError],
  [GrpcCode.AlreadyExists, AlreadyExistsError],
  [GrpcCode.PermissionDenied, PermissionDeniedError],
  [GrpcCode.ResourceExhausted, ResourceExhaustedError],
  [GrpcCode.FailedPrecondition, FailedPreconditionError],
  [GrpcCode.Aborted, AbortedError],
  [GrpcCode.OutOfRange, OutOfRangeError],
  [GrpcCode.Unimplemented, UnimplementedError],
  [GrpcCode.Internal, InternalError],
  [GrpcCode.Unavailable, UnavailableError],
  [GrpcCode.DataLoss, DataLossError],
  [GrpcCode.Unauthenticated, UnauthenticatedError],
]);

/** Builds the typed error for a gRPC status code. */
export function errorFromStatus(grpcCode: number, omniMessage: string, ctx: OmniErrorContext = {}): OmniError {
  const Cls = CLASS_BY_GRPC.get(grpcCode);
  return Cls ? new Cls(omniMessage, ctx) : new UnknownError(omniMessage, ctx);
}

/** Errors that are not from Omni: bad configuration, unreadable keys, transport failures. */
export class ClientError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ClientError';
    this.code = code;
  }
}

/** A key that cannot be used (not base64, not JSON, no name, encrypted, expired, ...). */
export class KeyError extends ClientError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STUB_KEY_INVALID', message, options);
    this.name = 'KeyError';
  }
}

/** The endpoint could not be reached (connection refused, DNS, TLS). */
export class TransportError extends ClientError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STUB_TRANSPORT', message, options);
    this.name = 'TransportError';
  }
}

/**
 * Stable codes of answers that are not what the protocol says (design.md rule 11) or that exceed a
 * read limit (rule 12); each has a row in docs/operator-guide.md.
 */
export type ProtocolCode =
  /** Not JSON, not UTF-8, or not the shape of the message asked for. */
  | 'STUB_PROTOCOL'
  /** An HTTP error status without a google.rpc.Status body: not an answer of Omni's gateway. */
  | 'STUB_HTTP_STATUS'
  /** A unary answer larger than its limit (compressed or inflated), or too many bytes being read at once. */
  | 'STUB_ANSWER_TOO_LARGE'
  /** One line of a List or Watch stream longer than its limit (compressed or inflated). */
  | 'STUB_LINE_TOO_LONG'
  /** More items in one List than the limit (`--max-list-items`). */
  | 'STUB_LIST_TOO_LONG'
  /** The same resource ID twice in one List. */
  | 'STUB_DUPLICATE_ID';

const PROTOCOL_HINT: Record<ProtocolCode, string> = {
  STUB_PROTOCOL: 'nothing was concluded from it; check that the endpoint is Omni\'s API and that no proxy in between changes answers, then run again',
  STUB_HTTP_STATUS: 'a proxy, an ingress or another server answered instead of Omni\'s API; check the endpoint (--omni-api-endpoint) and what sits in front of Omni',
  STUB_ANSWER_TOO_LARGE: 'refused before it was read whole; Omni\'s own messages are at most 32 MiB, so something in between is sending it',
  STUB_LINE_TOO_LONG: 'refused before it was read whole; Omni\'s own messages are at most 32 MiB, so something in between is sending it',
  STUB_LIST_TOO_LONG: 'if the fleet really is that large, raise --max-list-items',
  STUB_DUPLICATE_ID: 'Omni never lists an ID twice: something in between is repeating lines; nothing was concluded from it',
};

/**
 * A malformed or oversized answer: an error, never data. Names the call, the resource and the
 * endpoint; the detail (server text included) is already escaped. Exit 5: the run can be repeated.
 */
export class ProtocolError extends ClientError {
  declare readonly code: ProtocolCode;
  constructor(code: ProtocolCode, message: string, options?: { cause?: unknown }) {
    super(code, `${message} (${PROTOCOL_HINT[code]})`, options);
    this.name = 'ProtocolError';
  }
}

/** Omni's endpoint answered with a redirect: a proxy or ingress in the way, or the wrong URL. Exit 2. */
export class RedirectError extends ClientError {
  constructor(message: string) {
    super('STUB_REDIRECTED', message);
    this.name = 'RedirectError';
  }
}

/** Omni refused the signature and its clock is further from ours than the client adopts. Exit 4. */
export class ClockSkewError extends ClientError {
  constructor(message: string) {
    super('STUB_CLOCK_SKEW', message);
    this.name = 'ClockSkewError';
  }
}

export function isOmniError(e: unknown, cls?: { CODE: string }): e is OmniError {
  return e instanceof OmniError && (cls === undefined || e.code === cls.CODE);
}
