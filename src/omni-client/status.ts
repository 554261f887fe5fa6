// What a non-200 answer is (docs/design.md, "What an error is"). Only a google.rpc.Status body whose
// code maps to this very HTTP status is Omni's error: a NotFound is evidence, so a bare 404 page of
// a proxy must never read as one. A redirect is a configuration error; 502/503/504 without a status
// stay retriable transport errors; anything else is STUB_HTTP_STATUS.

import { isUtf8 } from 'node:buffer';
import type { Dispatcher } from 'undici';
import { discard, readAnswer, snippet, type ReadBudget, type ReadLimits } from './body.js';
import { errCtx, where, type CallContext } from './call.js';
import { ProtocolError, RedirectError, TransportError, errorFromStatus, httpStatusFromGrpcCode, type ClientError } from './errors.js';
import type { MethodName } from './wire.js';

export interface Status {
  code: number;
  message: string;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `{"code","message"}` or `{"error":{"code","message"}}` with a code 1..16 (a gRPC error), else undefined. */
export function statusOf(v: unknown): Status | undefined {
  if (!isObject(v)) return undefined;
  const o = isObject(v['error']) ? v['error'] : v;
  const code = o['code'];
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 1 || code > 16) return undefined;
  const message = o['message'];
  if (message !== undefined && typeof message !== 'string') return undefined;
  return { code, message: message ?? '' };
}

/** The status in an error body (a unary one, or the first line of a stream's), strictly UTF-8 and JSON. */
function parseStatusBody(raw: Buffer): Status | undefined {
  if (!isUtf8(raw)) return undefined;
  const text = raw.toString('utf8');
  try {
    return statusOf(JSON.parse(text));
  } catch {
    const first = text.split('\n').find((l) => l.trim() !== '');
    try {
      return first !== undefined ? statusOf(JSON.parse(first)) : undefined;
    } catch {
      return undefined;
    }
  }
}

/** The error a non-200 answer of `origin` is; its body is read within the limits. */
export async function errorOfAnswer(method: MethodName, ctx: CallContext, origin: string, res: Dispatcher.ResponseData, limits: ReadLimits, budget: ReadBudget): Promise<ClientError> {
  const http = res.statusCode;
  if (http >= 300 && http < 400) {
    discard(res.body);
    const loc = res.headers['location'];
    const target = Array.isArray(loc) ? loc[0] : loc;
    return new RedirectError(
      `${where(method, ctx)}: ${origin} answered HTTP ${http} redirecting to ${target ? snippet(target, 300) : '(no Location header)'}: ` +
        "Omni's API never redirects, so a proxy, an ingress or a login page is in the way, or the endpoint is not Omni's API; " +
        "set --omni-api-endpoint to the URL of Omni's API itself",
      errCtx(method, ctx),
    );
  }
  const raw = await readAnswer(res, limits, budget);
  const st = parseStatusBody(raw);
  if (st && httpStatusFromGrpcCode(st.code) === http) {
    // Omni's Date header goes with the error: a refused signature may call for adopting its clock.
    const date = res.headers['date'];
    return errorFromStatus(st.code, st.message, { ...errCtx(method, ctx), httpStatus: http, ...(typeof date === 'string' ? { serverDate: date } : {}) });
  }
  const what = `${where(method, ctx)}: ${origin} answered HTTP ${http} without a gRPC status (google.rpc.Status) for it: ${snippet(raw)}`;
  if (http === 502 || http === 503 || http === 504) {
    return new TransportError(`${what}; a proxy or load balancer in front of Omni could not reach it`, { ...errCtx(method, ctx), retriable: true });
  }
  return new ProtocolError('STUB_HTTP_STATUS', what, errCtx(method, ctx));
}
