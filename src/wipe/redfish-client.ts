// A minimal Redfish client for one BMC and one wipe: JSON over undici, a Redfish session when the
// BMC offers one (X-Auth-Token, deleted afterwards), HTTP basic auth otherwise. Every failure
// becomes a RedfishError that already says how the wipe ended (failed or skipped) and why.

import { Agent, request } from 'undici';
import type { Logger } from 'pino';
import { abortedByTimeout } from './result.js';
import { Reason } from './types.js';

export class RedfishError extends Error {
  readonly code = 'STUB_WIPE_REDFISH';
  constructor(
    readonly outcome: 'failed' | 'skipped',
    reason: string,
  ) {
    super(reason);
    this.name = 'RedfishError';
  }
}

export interface RedfishClientOptions {
  scheme: 'https' | 'http';
  host: string;
  port: number;
  username?: string;
  password?: string;
  insecureSkipTlsVerify: boolean;
  signal: AbortSignal;
  logger: Logger;
}

export interface RedfishResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** Connection-level failures: the BMC is not there (or not answering), so the wipe is skipped. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ECONNABORTED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_UNTRUSTED',
]);

export class RedfishClient {
  private readonly agent: Agent;
  private readonly origin: string;
  private auth: Record<string, string> = {};
  private sessionPath: string | undefined;

  constructor(private readonly o: RedfishClientOptions) {
    const host = o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host;
    this.origin = `${o.scheme}://${host}:${o.port}`;
    // One agent per wipe, closed afterwards: no sockets outlive the machine's wipe.
    this.agent = new Agent({ connect: { rejectUnauthorized: !o.insecureSkipTlsVerify }, pipelining: 0 });
  }

  /** Authenticates: a Redfish session at `sessionsPath` when given and the service makes one, basic auth otherwise. */
  async login(sessionsPath: string | undefined): Promise<'session' | 'basic' | 'none'> {
    const { username, password } = this.o;
    if (!username) return 'none';
    if (sessionsPath === undefined) return this.useBasicAuth();
    const res = await this.call('POST', sessionsPath, { UserName: username, Password: password ?? '' });
    const token = header(res.headers, 'x-auth-token');
    if (res.status >= 200 && res.status < 300 && token) {
      this.auth = { 'x-auth-token': token };
      const location = header(res.headers, 'location');
      const id = (res.body as { '@odata.id'?: unknown } | undefined)?.['@odata.id'];
      const where = location ?? (typeof id === 'string' ? id : undefined);
      if (where) this.sessionPath = new URL(where, this.origin).pathname;
      return 'session';
    }
    // Any other answer, 401 included (some BMCs answer 401 to every unknown path), means: try basic
    // auth; if the credentials are really wrong, the next request says so.
    this.o.logger.debug({ status: res.status }, 'no Redfish session; using basic auth');
    return this.useBasicAuth();
  }

  private useBasicAuth(): 'basic' {
    this.auth = {
      authorization: `Basic ${Buffer.from(`${this.o.username ?? ''}:${this.o.password ?? ''}`).toString('base64')}`,
    };
    return 'basic';
  }

  /** Deletes the session, if one was made. Never throws: the wipe's outcome is already decided. */
  async logout(): Promise<void> {
    const path = this.sessionPath;
    this.sessionPath = undefined;
    if (path) {
      try {
        // Not bound to the wipe's signal: a session left open would use up one of the BMC's few slots.
        await this.call('DELETE', path, undefined, {}, AbortSignal.timeout(5000));
      } catch (err) {
        this.o.logger.debug({ err: (err as Error).message }, 'could not delete the Redfish session');
      }
    }
    await this.agent.destroy().catch(() => undefined);
  }

  async get(path: string): Promise<RedfishResponse> {
    return this.expectOk('GET', path, await this.call('GET', path));
  }

  async send(
    method: 'POST' | 'PATCH',
    path: string,
    body: unknown,
    headers: Record<string, string> = {},
  ): Promise<RedfishResponse> {
    return this.expectOk(method, path, await this.call(method, path, body, headers));
  }

  /** GET without treating an error status as fatal (the service root may want auth on some BMCs). */
  async tryGet(path: string): Promise<RedfishResponse> {
    return this.call('GET', path);
  }

  private expectOk(method: string, path: string, res: RedfishResponse): RedfishResponse {
    if (res.status >= 200 && res.status < 300) return res;
    if (res.status === 401) throw new RedfishError('failed', Reason.credentialsRefused);
    throw new RedfishError(
      'failed',
      `Redfish ${method} ${path} answered HTTP ${res.status}${redfishMessage(res.body)}`,
    );
  }

  private async call(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    signal = this.o.signal,
  ): Promise<RedfishResponse> {
    try {
      // undici does not abort a request while its TLS connection is still being set up, so the
      // signal is raced here too; the agent is destroyed afterwards.
      const res = await untilAborted(
        signal,
        request(new URL(path, this.origin), {
          method: method as 'GET',
          dispatcher: this.agent,
          signal,
          headers: {
            accept: 'application/json',
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            'odata-version': '4.0',
            ...this.auth,
            ...headers,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
      );
      const text = await untilAborted(signal, res.body.text());
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: res.statusCode, headers: res.headers, body: parsed };
    } catch (err) {
      throw this.classify(err, signal);
    }
  }

  private classify(err: unknown, signal: AbortSignal): RedfishError {
    if (err instanceof RedfishError) return err;
    if (signal.aborted) {
      return abortedByTimeout(signal)
        ? new RedfishError('skipped', Reason.unreachable)
        : new RedfishError('failed', Reason.interrupted);
    }
    const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
    const code = e.code && e.code !== 'UND_ERR' ? e.code : e.cause?.code;
    const causeCode = e.cause?.code;
    if ((code && TLS_CODES.has(code)) || (causeCode && TLS_CODES.has(causeCode))) {
      return new RedfishError(
        'failed',
        `TLS verification of the BMC's certificate failed (${TLS_CODES.has(code ?? '') ? code : causeCode}): use ` +
          `--bmc-insecure-skip-tls-verify for a BMC with a self-signed certificate`,
      );
    }
    if ((code && UNREACHABLE_CODES.has(code)) || (causeCode && UNREACHABLE_CODES.has(causeCode))) {
      return new RedfishError('skipped', Reason.unreachable);
    }
    return new RedfishError('failed', `Redfish request failed: ${e.message ?? String(err)}`);
  }
}

function untilAborted<T>(signal: AbortSignal, p: Promise<T>): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  p.catch(() => undefined);
  return Promise.race([p, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

function header(h: RedfishResponse['headers'], name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The first message of a Redfish error body, for the reason. */
function redfishMessage(body: unknown): string {
  const e = (
    body as { error?: { message?: unknown; '@Message.ExtendedInfo'?: Array<{ Message?: unknown }> } } | undefined
  )?.error;
  const msg = e?.['@Message.ExtendedInfo']?.[0]?.Message ?? e?.message;
  return typeof msg === 'string' && msg ? `: ${msg.slice(0, 200)}` : '';
}
