// The client's own errors, under the API's root (ApiError, src/omni-api/errors.ts), in the style of
// undici's lib/core/errors.js: each class has a stable `code` (docs/operator-guide.md lists them,
// exit-codes.ts maps them to exit codes), and each instance says whether sending the same call again
// may succeed (`retriable`). Retries, clock-skew adoption and watch resumption decide from those
// fields and from what an error carries (Omni's Date header, the gRPC code), never from side tables.

import { ApiError, type ApiErrorOptions, type OmniCodedError, type ProtocolCode } from '../omni-api/errors.js';

/** A class of the client's own errors with one code. */
function fixedCode<const C extends string>(code: C) {
  return class extends ApiError {
    static readonly CODE = code;
    declare readonly code: C;
    constructor(message: string, options?: ApiErrorOptions) {
      super(code, message, options);
    }
  };
}

/** Bad configuration found before any call: a malformed endpoint, an unreadable CA file. Exit 2. */
export class ConfigError extends fixedCode('STUB_CONFIG') {}

/** A key that cannot be used (not base64, not JSON, no name, encrypted, expired, ...). Exit 2. */
export class KeyError extends fixedCode('STUB_KEY_INVALID') {}

/**
 * Omni could not be reached, or the exchange broke (connection refused or reset, DNS, TLS, a proxy's
 * 502/503/504). The transport says which are `retriable` (a reset connection is, a certificate that
 * cannot be trusted is not).
 */
export class TransportError extends fixedCode('STUB_TRANSPORT') {}

/**
 * A List or a Watch's opening that stopped delivering: no line for the stream idle deadline
 * (`--stream-idle-timeout`), or slower on average than the pace limit (transport/deadline.ts). A slow
 * stream that keeps delivering is not this. Exit 5.
 */
export class StreamStalledError extends fixedCode('STUB_STREAM_STALLED') {}

const PROTOCOL_HINT: Record<ProtocolCode, string> = {
  STUB_PROTOCOL:
    "nothing was concluded from it; check that the endpoint is Omni's API and that no proxy in between changes " +
    'answers, then run again',
  STUB_HTTP_STATUS:
    "a proxy, an ingress or another server answered instead of Omni's API; check the endpoint (--omni-api-endpoint) " +
    'and what sits in front of Omni',
  STUB_ANSWER_TOO_LARGE:
    "refused before it was read whole; Omni's own messages are at most 32 MiB, so something in between is sending it",
  STUB_LINE_TOO_LONG:
    "refused before it was read whole; Omni's own messages are at most 32 MiB, so something in between is sending it",
  STUB_LIST_TOO_LONG: 'if the fleet really is that large, raise --max-list-items',
  STUB_DUPLICATE_ID:
    'Omni never lists an ID twice: something in between is repeating lines; nothing was concluded from it',
};

/**
 * A malformed or oversized answer: an error, never data. Names the call, the resource and the
 * endpoint; the detail (server text included) is already escaped. Exit 5: the run can be repeated.
 * Never retriable: sending the call again would only read it again.
 */
export class ProtocolError extends ApiError {
  declare readonly code: ProtocolCode;
  constructor(code: ProtocolCode, message: string, options?: Omit<ApiErrorOptions, 'retriable'>) {
    super(code, `${message} (${PROTOCOL_HINT[code]})`, options);
  }
}

/** Omni's endpoint answered with a redirect: a proxy or ingress in the way, or the wrong URL. Exit 2. */
export class RedirectError extends fixedCode('STUB_REDIRECTED') {}

/** Omni refused the signature and its clock is further from ours than the client adopts. Exit 4. */
export class ClockSkewError extends fixedCode('STUB_CLOCK_SKEW') {}

/**
 * A write that Omni (or a proxy in front of it) kept throttling until its retries or its time ran out
 * (pressure.ts): nothing more was sent. Exit 5: a run later, or with a lower --concurrency, carries on.
 */
export class ThrottledError extends fixedCode('STUB_THROTTLED') {}

/**
 * A write Omni refused as larger than its write budget's burst for infra providers (ResourceExhausted, pressure.ts):
 * no retry can pass it, only an Omni admin raising the burst. Sent once; the run stops. Exit 6.
 */
export class WriteTooLargeError extends fixedCode('STUB_WRITE_TOO_LARGE') {}

/**
 * A write not sent because the caller's time for writes (`notAfter`, a run's --timeout) had passed before it could
 * start, or before it could be sent again after a read-back showed it had not taken effect. Nothing of it reached Omni.
 */
export class DeadlineReachedError extends fixedCode('STUB_DEADLINE') {}

/** A write of a resource read without its spec, refused before it is sent (it would erase the spec). */
export class SpecOmittedError extends fixedCode('CLIENT_SPEC_OMITTED') {}

/**
 * Codes of a call that broke in transit rather than being refused: reconnecting a watch after one may
 * succeed (a connection reset or closed, Omni restarting or overloaded, the opening's deadline, a
 * cancellation that was not the caller's). Anything else repeats: a refusal, a malformed answer.
 */
const BROKEN_IN_TRANSIT = new Set<string>([
  'STUB_TRANSPORT',
  'STUB_STREAM_STALLED',
  'OMNI_UNAVAILABLE',
  'OMNI_DEADLINE_EXCEEDED',
  'OMNI_ABORTED',
  'OMNI_CANCELED',
]);

export function brokeInTransit(e: unknown): e is ApiError {
  return e instanceof ApiError && BROKEN_IN_TRANSIT.has(e.code);
}

/** Every error class with a fixed code (or, for ProtocolError, a set of them). */
type CodedError =
  | OmniCodedError
  | ConfigError
  | KeyError
  | TransportError
  | StreamStalledError
  | ProtocolError
  | RedirectError
  | ClockSkewError
  | ThrottledError
  | WriteTooLargeError
  | DeadlineReachedError
  | SpecOmittedError;
/** The error classes by their stable code, for `hasCode`. */
type ClassByCode = { [E in CodedError as E['code']]: E };
export type ClientErrorCode = keyof ClassByCode;

/** Whether `e` is the client's error with this stable code (narrowed to its class). */
export function hasCode<C extends ClientErrorCode>(e: unknown, code: C): e is ClassByCode[C] {
  return e instanceof ApiError && e.code === code;
}
