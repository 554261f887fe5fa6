// Exit codes of design.md ("Exit codes"), and the errors that carry them.

import { ClientError, KeyError, OmniError, GrpcCode } from './omni-client/errors.js';

export const ExitCode = {
  OK: 0,
  Internal: 1,
  Usage: 2,
  Preflight: 3,
  Auth: 4,
  Incomplete: 5,
  SigInt: 130,
  SigTerm: 143,
} as const;
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/** An error that already knows its exit code. `code` is a stable string for reports. */
export class StubError extends Error {
  readonly code: string;
  readonly exitCode: ExitCodeValue;
  constructor(code: string, exitCode: ExitCodeValue, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StubError';
    this.code = code;
    this.exitCode = exitCode;
  }
}

export class UsageError extends StubError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STUB_USAGE', ExitCode.Usage, message, options);
    this.name = 'UsageError';
  }
}

export class PreflightError extends StubError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, ExitCode.Preflight, message, options);
    this.name = 'PreflightError';
  }
}

export class IncompleteError extends StubError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STUB_INCOMPLETE', ExitCode.Incomplete, message, options);
    this.name = 'IncompleteError';
  }
}

/**
 * The client's errors that retrying cannot fix; every other one (transport, protocol, read limits)
 * is exit 5. A redirect is configuration (a proxy or ingress in the way, or the wrong URL); a clock
 * further from Omni's than the client adopts shows as Omni refusing the signature: exit 4 like any
 * refused signature (design.md, Exit codes).
 */
const CLIENT_EXIT: Record<string, ExitCodeValue> = {
  STUB_CONFIG: ExitCode.Usage,
  STUB_REDIRECTED: ExitCode.Usage,
  STUB_CLOCK_SKEW: ExitCode.Auth,
};

/** Maps any error to the exit code a Job can act on. */
export function exitCodeFor(err: unknown): ExitCodeValue {
  if (err instanceof StubError) return err.exitCode;
  if (err instanceof KeyError) return ExitCode.Usage;
  if (err instanceof OmniError) {
    if (err.grpcCode === GrpcCode.Unauthenticated || err.grpcCode === GrpcCode.PermissionDenied) return ExitCode.Auth;
    if (err.grpcCode === GrpcCode.Unavailable || err.grpcCode === GrpcCode.DeadlineExceeded) return ExitCode.Incomplete;
    return ExitCode.Internal;
  }
  if (err instanceof ClientError) return CLIENT_EXIT[err.code] ?? ExitCode.Incomplete;
  return ExitCode.Internal;
}
