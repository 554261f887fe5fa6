// The headers of every call: siderov1 signature headers (auth.ts's Signer makes them), the content
// type, what encodings are asked for (gzip), the user agent; and what Omni's refusal of them says.

import { errCtx, type CallContext } from './call.js';
import type { GzipChoice } from './compression.js';
import { UnauthenticatedError } from '../../omni-api/errors.js';
import type { MethodName } from '../../omni-api/wire.js';
import { VERSION } from '../../version.js';

/** What the transport needs from auth.ts's Signer. */
export interface RequestSigner {
  readonly name: string;
  readonly fingerprint: string;
  headers(fullMethod: string, timestampSec: number): Promise<Record<string, string>>;
  /** The same headers without waiting, when they are made already (else undefined: call `headers`). */
  ready?(fullMethod: string, timestampSec: number): Record<string, string> | undefined;
}

const USER_AGENT = `stub-provider/${VERSION}`;
const STREAM_METHODS = new Set<MethodName>(['List', 'Watch']);

export class RequestHeaders {
  #cache = new WeakMap<Record<string, string>, Record<string, string>>();

  /** `gzip`: which calls ask for gzip (compression.ts, from TransportOptions.gzip). */
  constructor(
    readonly signer: RequestSigner,
    private readonly gzip: GzipChoice,
  ) {}

  /**
   * The full header set of a call signed with `signed`. The signer hands out the same object for a
   * method within a second: the set is built once per signature, not per call.
   */
  of(method: MethodName, signed: Record<string, string>): Record<string, string> {
    let headers = this.#cache.get(signed);
    if (!headers) {
      headers = {
        'content-type': 'application/json',
        accept: 'application/json',
        // Omni's gzip handler picks only a bare `gzip` token; its `deflate` is raw DEFLATE
        // (docs/omni-behaviour.md, "Resources and routes"). No header at all (not `identity`) when
        // gzip is not wanted: Omni then answers uncompressed.
        ...((STREAM_METHODS.has(method) ? this.gzip.streams : this.gzip.unary) ? { 'accept-encoding': 'gzip' } : {}),
        'user-agent': USER_AGENT,
        ...signed,
      };
      this.#cache.set(signed, headers);
    }
    return headers;
  }

  /** Omni refused the signature for another reason than the clock: who was refused, never the key. */
  refused(method: MethodName, ctx: CallContext, e: UnauthenticatedError): UnauthenticatedError {
    return new UnauthenticatedError(
      `${e.omniMessage}: Omni refused identity "${this.signer.name}" with key fingerprint ${this.signer.fingerprint} ` +
        '(the key is unknown to this Omni, expired, revoked or not confirmed; check the endpoint and the key)',
      { ...errCtx(method, ctx), ...(e.httpStatus !== undefined ? { httpStatus: e.httpStatus } : {}) },
    );
  }
}
