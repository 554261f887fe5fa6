// Exit codes of docs/design.md ("Exit codes"), and the errors that carry them.

import { ApiError, OmniError } from './omni-api/errors.js';

export const ExitCode = {
  OK: 0,
  Internal: 1,
  Usage: 2,
  Preflight: 3,
  Auth: 4,
  Incomplete: 5,
  /** Omni's configuration refuses a write (over its write burst): an Omni admin must act; a Job must not retry. */
  OmniLimit: 6,
  /** `plan` only: a run would change something now (like `kubectl diff`'s 1, which here means an internal error). */
  ChangesPending: 10,
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

/**
 * An exit code that the result already explains (`plan`'s 10, changes pending): cli.ts exits with it
 * and prints nothing more.
 */
export class ResultExit extends Error {
  constructor(readonly exitCode: ExitCodeValue) {
    super(`exit ${exitCode}`);
    this.name = 'ResultExit';
  }
}

/**
 * The exit code of each of the client's stable codes that is not exit 5. Configuration (a malformed
 * endpoint or CA file, an unusable key, a redirect: a proxy or ingress in the way, or the wrong URL)
 * is 2; a refused signature or operation is 4, and so is a clock further from Omni's than the client
 * adopts, which shows as Omni refusing the signature; an overloaded Omni or a deadline is 5; a write
 * larger than Omni's write burst is 6 (no retry can pass it). Any other
 * gRPC status is one the stub did not expect (1); any other code of the client's (transport, protocol,
 * read limits) is 5: the run can be repeated (docs/design.md, "Exit codes").
 */
const EXIT_BY_CODE: Record<string, ExitCodeValue> = {
  STUB_CONFIG: ExitCode.Usage,
  STUB_INPUT_NOT_A_FILE: ExitCode.Usage,
  STUB_INPUT_TOO_LARGE: ExitCode.Usage,
  STUB_KEY_INVALID: ExitCode.Usage,
  STUB_REDIRECTED: ExitCode.Usage,
  STUB_CLOCK_SKEW: ExitCode.Auth,
  OMNI_UNAUTHENTICATED: ExitCode.Auth,
  OMNI_PERMISSION_DENIED: ExitCode.Auth,
  OMNI_UNAVAILABLE: ExitCode.Incomplete,
  OMNI_DEADLINE_EXCEEDED: ExitCode.Incomplete,
  STUB_WRITE_TOO_LARGE: ExitCode.OmniLimit,
};

/** Maps any error to the exit code a Job can act on. */
export function exitCodeFor(err: unknown): ExitCodeValue {
  if (err instanceof StubError) return err.exitCode;
  if (err instanceof ApiError)
    return EXIT_BY_CODE[err.code] ?? (err instanceof OmniError ? ExitCode.Internal : ExitCode.Incomplete);
  return ExitCode.Internal;
}

/** What a person and a report are told about an error: its stable code, message and exit code. */
export interface ErrorDescription {
  code: string;
  message: string;
  exitCode: ExitCodeValue;
}

export function describeError(err: unknown): ErrorDescription {
  const e = err as { message?: unknown; code?: unknown };
  const message = typeof e?.message === 'string' ? e.message : String(err);
  // Our errors and the client's carry a stable code; anything else is unexpected (a bug).
  const code =
    (err instanceof StubError || err instanceof ApiError) && typeof e.code === 'string' ? e.code : 'STUB_INTERNAL';
  const hint = tlsHint(err);
  return { code, message: hint ? `${message}. ${hint}` : message, exitCode: exitCodeFor(err) };
}

/** Node's codes (err.code) for a certificate it cannot trust, by what the operator can do about it. */
const UNTRUSTED_CERT = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_CHAIN_TOO_LONG',
]);
const WRONG_HOST = new Set(['ERR_TLS_CERT_ALTNAME_INVALID', 'HOSTNAME_MISMATCH']);
const EXPIRED_CERT = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);

/**
 * For a TLS failure anywhere in the error's cause chain, what to do: the flags that fix it. The
 * transport's message names Node's code; this says which flag it calls for.
 */
export function tlsHint(err: unknown): string | undefined {
  for (
    let e: unknown = err, depth = 0;
    e && typeof e === 'object' && depth < 8;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (UNTRUSTED_CERT.has(code)) {
      return (
        "Omni's certificate is not signed by a CA this machine trusts (self-signed, or a private CA): pass " +
        '--ca-file <the CA certificate, PEM>; only for a test server, --insecure-skip-tls-verify turns the check ' +
        'off'
      );
    }
    if (WRONG_HOST.has(code)) {
      return (
        "Omni's certificate does not name this host: use the host name the certificate names in " +
        '--omni-api-endpoint (--ca-file cannot fix this); only for a test server, --insecure-skip-tls-verify ' +
        'turns the check off'
      );
    }
    if (EXPIRED_CERT.has(code)) {
      return (
        "Omni's certificate is expired or not valid yet (or this machine's clock is wrong): renew it or fix the " +
        'clock (--ca-file cannot fix this); only for a test server, --insecure-skip-tls-verify turns the check ' +
        'off'
      );
    }
  }
  return undefined;
}
