// The Omni API client: one transport (one shared undici dispatcher), one signer, one State.

import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { loadServiceAccountKey, parseServiceAccountKey, Signer, type ServiceAccountKey } from './auth.js';
import { GatewayState } from './state.js';
import { Transport, type DelayFn, type DispatcherKind } from './transport.js';
import type { State } from './types.js';

export interface OmniClientOptions {
  /** `https://host[:port]`, `http://host[:port]` or `grpc://host:port`. */
  endpoint: string;
  /** The OMNI_SERVICE_ACCOUNT_KEY value, or a key already loaded (see auth.ts loadServiceAccountKey). */
  key: string | ServiceAccountKey;
  caFile?: string;
  insecureSkipTlsVerify?: boolean;
  logger?: Logger;
  /** Upper bound of connections to Omni. Default 16. */
  connections?: number;
  /** Default per-call deadline in ms. Default 30 s. */
  timeoutMs?: number;
  now?: () => number;
  delay?: DelayFn;
  random?: () => number;
  /** Extra attempts on Unavailable and broken connections. Default 4. */
  retries?: number;
  /** Where proxy variables are read from; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Which calls ask for gzip (transport.ts): 'streams' (List, Watch; default) or 'all'. */
  gzip?: 'streams' | 'all';
}

export interface OmniClient {
  state: State;
  /** `<id>` of the key's `infra-provider:<id>` name. */
  providerId: string;
  /** The identity name and key fingerprint (never the key). */
  identity: { name: string; fingerprint: string; expiresAt?: Date };
  /** The normalised origin calls go to. */
  endpoint: string;
  dispatcherKind: DispatcherKind;
  /** Cancels calls in flight (watches included) and closes the connections. */
  close(): Promise<void>;
  /** Offset added to the local clock when signing; non-zero after Omni's clock was adopted. */
  serverClockOffsetMs(): number;
  stats(): { callsByMethod: Record<string, number>; signOps: number };
}

export async function createOmniClient(opts: OmniClientOptions): Promise<OmniClient> {
  const now = opts.now ?? Date.now;
  const logger = opts.logger ?? silentLogger();
  const key = typeof opts.key === 'string' ? await parseServiceAccountKey(opts.key, { now }) : opts.key;
  const signer = new Signer(key);
  const transport = new Transport({
    endpoint: opts.endpoint,
    signer,
    logger,
    now,
    ...(opts.caFile !== undefined ? { caFile: opts.caFile } : {}),
    ...(opts.insecureSkipTlsVerify !== undefined ? { insecureSkipTlsVerify: opts.insecureSkipTlsVerify } : {}),
    ...(opts.connections !== undefined ? { connections: opts.connections } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
    ...(opts.delay ? { delay: opts.delay } : {}),
    ...(opts.random ? { random: opts.random } : {}),
    ...(opts.retries !== undefined ? { retries: opts.retries } : {}),
    ...(opts.env ? { env: opts.env } : {}),
    ...(opts.gzip ? { gzip: opts.gzip } : {}),
  });
  if (opts.insecureSkipTlsVerify) logger.warn({ endpoint: transport.endpoint.origin }, 'TLS certificate verification is disabled (--insecure-skip-tls-verify)');
  const state = new GatewayState(transport, {
    logger,
    ...(opts.delay ? { delay: opts.delay } : {}),
    ...(opts.random ? { random: opts.random } : {}),
  });
  return {
    state,
    providerId: key.providerId,
    identity: { name: key.name, fingerprint: key.fingerprint, ...(key.expiresAt ? { expiresAt: key.expiresAt } : {}) },
    endpoint: transport.endpoint.origin,
    dispatcherKind: transport.dispatcherKind,
    close: () => transport.close(),
    serverClockOffsetMs: () => transport.clockOffsetMs(),
    stats: () => ({ ...transport.stats(), signOps: signer.stats().signOps }),
  };
}

export { loadServiceAccountKey };
