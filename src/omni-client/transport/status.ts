// What a non-200 answer is (docs/design.md, "What an error is"). Only a google.rpc.Status body whose
// code maps to this very HTTP status is Omni's error: a NotFound is evidence, so a bare 404 page of
// a proxy must never read as one. A redirect is a configuration error; 502/503/504 without a status
// stay retriable transport errors, and so does a 429 (a rate-limiting proxy: back-pressure, not a
// refusal); anything else is STUB_HTTP_STATUS. A `Retry-After` (seconds or an HTTP-date) is carried
// on the error as `retryAfterMs`, whoever answered; pressure.ts and retry.ts decide how much of it
// to honour.

import { isUtf8 } from 'node:buffer';
import type { Dispatcher } from 'undici';
import { discard, readAnswer, snippet, type ReadBudget, type ReadLimits } from './body.js';
import { errCtx, where, type CallContext } from './call.js';
import { ProtocolError, RedirectError, TransportError } from '../errors.js';
import { errorFromStatus, httpStatusFromGrpcCode, type ApiError } from '../../omni-api/errors.js';
import type { MethodName } from '../../omni-api/wire.js';

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

/**
 * `Retry-After` in ms from now (`nowMs`: when the answer arrived): delay-seconds, or an HTTP-date
 * compared with the answer's own Date header when it has one (the server's clock, not ours).
 * Undefined when absent or unreadable; never negative. Not capped here: its users cap it.
 */
export function retryAfterOf(
  headers: Record<string, string | string[] | undefined>,
  nowMs: number = Date.now(),
): number | undefined {
  const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v)?.trim();
  const v = one(headers['retry-after']);
  if (v === undefined || v === '') return undefined;
  if (/^\d+$/.test(v)) return Math.min(Number(v), 1e9) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  const date = one(headers['date']);
  const serverNow = date !== undefined && !Number.isNaN(Date.parse(date)) ? Date.parse(date) : nowMs;
  return Math.max(0, at - serverNow);
}

/** The error a non-200 answer of `origin` is; its body is read within the limits. */
export async function errorOfAnswer(
  method: MethodName,
  ctx: CallContext,
  origin: string,
  res: Dispatcher.ResponseData,
  limits: ReadLimits,
  budget: ReadBudget,
): Promise<ApiError> {
  const http = res.statusCode;
  if (http >= 300 && http < 400) {
    discard(res.body);
    const loc = res.headers['location'];
    const target = Array.isArray(loc) ? loc[0] : loc;
    return new RedirectError(
      `${where(method, ctx)}: ${origin} answered HTTP ${http} redirecting to ` +
        `${target ? snippet(target, 300) : '(no Location header)'}: ` +
        ("Omni's API never redirects, so a proxy, an ingress or a login page is in the way, or the endpoint is not " +
          "Omni's API; ") +
        "set --omni-api-endpoint to the URL of Omni's API itself",
      errCtx(method, ctx),
    );
  }
  const retryAfterMs = retryAfterOf(res.headers);
  const after = retryAfterMs !== undefined ? { retryAfterMs } : {};
  const raw = await readAnswer(res, limits, budget);
  const st = parseStatusBody(raw);
  if (st && httpStatusFromGrpcCode(st.code) === http) {
    // Omni's Date header goes with the error: a refused signature may call for adopting its clock.
    const date = res.headers['date'];
    return errorFromStatus(st.code, st.message, {
      ...errCtx(method, ctx),
      httpStatus: http,
      ...after,
      ...(typeof date === 'string' ? { serverDate: date } : {}),
    });
  }
  const what =
    `${where(method, ctx)}: ${origin} answered HTTP ${http} without a gRPC status (google.rpc.Status) for ` +
    `it: ${snippet(raw)}`;
  if (http === 429) {
    return new TransportError(`${what}; a proxy in front of Omni is limiting requests (too many requests)`, {
      ...errCtx(method, ctx),
      retriable: true,
      httpStatus: http,
      ...after,
    });
  }
  if (http === 502 || http === 503 || http === 504) {
    return new TransportError(`${what}; a proxy or load balancer in front of Omni could not reach it`, {
      ...errCtx(method, ctx),
      retriable: true,
      httpStatus: http,
      ...after,
    });
  }
  return new ProtocolError('STUB_HTTP_STATUS', what, errCtx(method, ctx));
}
