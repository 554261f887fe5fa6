// The Omni API client: one transport (one shared undici dispatcher), one signer, one State (the
// gateway's CoreState, its writes under back-pressure control (pressure.ts), wrapped by wrap.ts).

import { silentLogger } from '../log.js';
import { parseServiceAccountKey, Signer, type ServiceAccountKey } from './transport/auth.js';
import { withBackPressure, type BackPressureOptions, type ThrottlingStats } from './write/pressure.js';
import { GatewayState } from './gateway-state.js';
import type { DispatcherKind } from './transport/dispatcher.js';
import { Transport, type TransportOptions } from './transport/transport.js';
import type { State } from '../omni-api/state.js';
import type { WriteObserver } from './write/observer.js';
import { wrapCore } from './wrap.js';

/** The transport's options (transport.ts), with the key in place of a signer. */
export interface OmniClientOptions extends Omit<TransportOptions, 'endpoint' | 'signer' | 'backoff'> {
  /** `https://host[:port]`, `http://host[:port]` or `grpc://host:port`. */
  endpoint: string;
  /** The OMNI_SERVICE_ACCOUNT_KEY value, or a key already loaded (see auth.ts loadServiceAccountKey). */
  key: string | ServiceAccountKey;
  /** Told of every write before it is sent and of its outcome (gateway-state.ts); the audit log. */
  onWrite?: WriteObserver;
  /** How writes ride out back-pressure (pressure.ts); the most in flight defaults to `connections`. */
  backPressure?: Partial<Omit<BackPressureOptions, 'logger' | 'now' | 'delay' | 'random'>>;
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
  /** How much the writes were throttled so far (pressure.ts). */
  throttling(): ThrottlingStats;
}

export async function createOmniClient(opts: OmniClientOptions): Promise<OmniClient> {
  const now = opts.now ?? Date.now;
  const logger = opts.logger ?? silentLogger();
  const key = typeof opts.key === 'string' ? await parseServiceAccountKey(opts.key, { now }) : opts.key;
  const signer = new Signer(key);
  const { key: _key, onWrite, backPressure, ...transportOpts } = opts;
  const transport = new Transport({ ...transportOpts, signer, logger, now });
  if (opts.insecureSkipTlsVerify)
    logger.warn(
      { endpoint: transport.endpoint.origin },
      'TLS certificate verification is disabled (--insecure-skip-tls-verify)',
    );
  const timing = {
    logger,
    ...(opts.delay ? { delay: opts.delay } : {}),
    ...(opts.random ? { random: opts.random } : {}),
  };
  const pressured = withBackPressure(new GatewayState(transport, { ...timing, ...(onWrite ? { onWrite } : {}) }), {
    maxWritesInFlight: opts.connections ?? 16,
    ...backPressure,
    ...timing,
  });
  const state = wrapCore(pressured, timing);
  return {
    state,
    providerId: key.providerId,
    identity: { name: key.name, fingerprint: key.fingerprint, ...(key.expiresAt ? { expiresAt: key.expiresAt } : {}) },
    endpoint: transport.endpoint.origin,
    dispatcherKind: transport.dispatcherKind,
    close: () => transport.close(),
    serverClockOffsetMs: () => transport.clockOffsetMs(),
    stats: () => ({ ...transport.stats(), signOps: signer.stats().signOps }),
    throttling: () => pressured.throttling(),
  };
}
