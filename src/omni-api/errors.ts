// The errors of Omni's API, shared by the client and the simulated Omni, in the style of undici's
// lib/core/errors.js: one root (ApiError) with a stable `code` (docs/operator-guide.md lists them,
// exit-codes.ts maps them to exit codes) and whether sending the same call again may succeed
// (`retriable`); gRPC's status codes, one class per code (OmniError), and the typed error for a
// status. The client's own errors (transport, protocol, configuration) extend the root in
// src/omni-client/errors.ts.
//
// Callers decide from the code plus context (which method, what they sent): Omni uses one gRPC code
// for several conditions (PermissionDenied is both "access refused" and "owner conflict").

import type { Pointer } from './resource.js';
import { describePointer } from './resource.js';
import { escapeControl } from './untrusted.js';

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

const NAME_BY_NUMBER = new Map<number, GrpcCodeName>(Object.entries(GrpcCode).map(([k, v]) => [v, k as GrpcCodeName]));

export function grpcCodeName(code: number): GrpcCodeName {
  return NAME_BY_NUMBER.get(code) ?? 'Unknown';
}

/** grpc-gateway's runtime.HTTPStatusFromCode (docs/design.md, "What an error is"). */
export function httpStatusFromGrpcCode(code: number): number {
  switch (code) {
    case GrpcCode.OK:
      return 200;
    case GrpcCode.Canceled:
      return 499;
    case GrpcCode.Unknown:
      return 500;
    case GrpcCode.InvalidArgument:
      return 400;
    case GrpcCode.DeadlineExceeded:
      return 504;
    case GrpcCode.NotFound:
      return 404;
    case GrpcCode.AlreadyExists:
      return 409;
    case GrpcCode.PermissionDenied:
      return 403;
    case GrpcCode.ResourceExhausted:
      return 429;
    case GrpcCode.FailedPrecondition:
      return 400;
    case GrpcCode.Aborted:
      return 409;
    case GrpcCode.OutOfRange:
      return 400;
    case GrpcCode.Unimplemented:
      return 501;
    case GrpcCode.Internal:
      return 500;
    case GrpcCode.Unavailable:
      return 503;
    case GrpcCode.DataLoss:
      return 500;
    case GrpcCode.Unauthenticated:
      return 401;
    default:
      return 500;
  }
}

export interface ApiErrorOptions {
  cause?: unknown;
  /** Sending the same call again may succeed (a broken connection, an overloaded Omni). Default false. */
  retriable?: boolean;
  /** The gRPC method, e.g. `/cosi.resource.State/Update`. */
  method?: string;
  /** The resource the call was about. */
  resource?: Pointer;
  /** The HTTP status of the answer that carried the error (Omni's, or a proxy's). */
  httpStatus?: number;
  /** How long the server (or a proxy in front of it) asked to wait before another call (`Retry-After`), in ms. */
  retryAfterMs?: number;
}

/**
 * The root of every error of the API (the client's and the sim's). `code` is stable; `message` names what failed,
 * escaped.
 */
export class ApiError extends Error {
  readonly code: string;
  /** Whether the transport may send the same call again (see ApiErrorOptions). */
  readonly retriable: boolean;
  readonly method: string | undefined;
  readonly resource: Pointer | undefined;
  /**
   * The answer's `Retry-After`, in ms from when it arrived (the client's transport/status.ts); undefined when it had
   * none.
   */
  readonly retryAfterMs: number | undefined;
  readonly httpStatus: number | undefined;

  constructor(code: string, message: string, options: ApiErrorOptions = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.method = options.method;
    this.resource = options.resource;
    this.retryAfterMs = options.retryAfterMs;
    this.httpStatus = options.httpStatus;
  }
}

export interface OmniErrorContext extends Omit<ApiErrorOptions, 'retriable'> {
  /** The Date header of the answer that carried the error: Omni's clock, for skew adoption. */
  serverDate?: string;
}

/**
 * An error with a gRPC status: Omni's answer (the status body of an error), or the client's own
 * cancellation and deadline, which use gRPC's codes as the Go client does. Only Unavailable is
 * retriable: every other code is Omni's decision about this very request.
 */
export class OmniError extends ApiError {
  readonly grpcCode: number;
  /** Omni's message as sent (`message` has it escaped, after the call and the code). */
  readonly omniMessage: string;
  readonly serverDate: string | undefined;

  constructor(grpcCode: number, omniMessage: string, ctx: OmniErrorContext = {}, code = 'OMNI_ERR') {
    const where = [ctx.method, ctx.resource ? describePointer(ctx.resource) : undefined].filter(Boolean).join(' ');
    // Omni's message (and an ID read from Omni) may hold control characters: inert in `message`,
    // as sent in `omniMessage`.
    super(code, escapeControl(`${where ? `${where}: ` : ''}${grpcCodeName(grpcCode)}: ${omniMessage}`), {
      ...ctx,
      retriable: grpcCode === GrpcCode.Unavailable,
    });
    this.grpcCode = grpcCode;
    this.omniMessage = omniMessage;
    this.serverDate = ctx.serverDate;
  }
}

function codeClass<const C extends string>(code: C, grpc: number) {
  return class extends OmniError {
    static readonly CODE = code;
    static readonly GRPC = grpc;
    declare readonly code: C;
    constructor(omniMessage: string, ctx: OmniErrorContext = {}) {
      super(grpc, omniMessage, ctx, code);
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

/** An ERRORED watch event (e.g. "buffer overrun"): the watch cannot go on. */
export class WatchErroredError extends OmniError {
  static readonly CODE = 'OMNI_WATCH_ERRORED';
  declare readonly code: 'OMNI_WATCH_ERRORED';
  constructor(message: string, ctx: OmniErrorContext = {}) {
    super(GrpcCode.Unknown, message, ctx, 'OMNI_WATCH_ERRORED');
  }
}

/** One class per gRPC code. */
const OMNI_CLASSES = [
  CanceledError,
  UnknownError,
  InvalidArgumentError,
  DeadlineExceededError,
  NotFoundError,
  AlreadyExistsError,
  PermissionDeniedError,
  ResourceExhaustedError,
  FailedPreconditionError,
  AbortedError,
  OutOfRangeError,
  UnimplementedError,
  InternalError,
  UnavailableError,
  DataLossError,
  UnauthenticatedError,
] as const;
const CLASS_BY_GRPC = new Map<number, new (m: string, c?: OmniErrorContext) => OmniError>(
  OMNI_CLASSES.map((c) => [c.GRPC, c]),
);

/** Builds the typed error for a gRPC status code. */
export function errorFromStatus(grpcCode: number, omniMessage: string, ctx: OmniErrorContext = {}): OmniError {
  const Cls = CLASS_BY_GRPC.get(grpcCode);
  return Cls ? new Cls(omniMessage, ctx) : new UnknownError(omniMessage, ctx);
}

/**
 * Stable codes of answers that are not what the protocol says (docs/design.md rule 11) or that exceed a
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

/** Every error class of a gRPC code (and an ERRORED watch), for the client's `hasCode`. */
export type OmniCodedError = InstanceType<(typeof OMNI_CLASSES)[number]> | WatchErroredError;
