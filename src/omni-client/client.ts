// The Omni API client: one transport (one shared undici dispatcher), one signer, one State: the
// gateway's CoreState under the one limit on calls in flight (call-limit.ts), its writes under
// back-pressure control (pressure.ts), wrapped by wrap.ts. `concurrency` is that limit; the write
// window's maximum and the connections for calls are the same number.

import { silentLogger } from '../log.js';
import { parseServiceAccountKey, Signer, type ServiceAccountKey } from './transport/auth.js';
import { withBackPressure, type BackPressureOptions } from './write/pressure.js';
import type { ThrottlingStats } from './write/throttling.js';
import { GatewayState } from './gateway-state.js';
import type { DispatcherKind } from './transport/dispatcher.js';
import { Transport, type TransportOptions } from './transport/transport.js';
import type { State } from '../omni-api/state.js';
import type { WriteObserver } from './write/observer.js';
import { wrapCore } from './wrap.js';
import { CALL_LIMIT_DEFAULTS, CallGate, withCallLimit } from './call-limit.js';

/** The transport's options (transport.ts), with the key in place of a signer. */
export interface OmniClientOptions extends Omit<TransportOptions, 'endpoint' | 'signer' | 'backoff' | 'connections'> {
  /** `https://host[:port]`, `http://host[:port]` or `grpc://host:port`. */
  endpoint: string;
  /** The OMNI_SERVICE_ACCOUNT_KEY value, or a key already loaded (see auth.ts loadServiceAccountKey). */
  key: string | ServiceAccountKey;
  /** Told of every write before it is sent and of its outcome (gateway-state.ts); the audit log. */
  onWrite?: WriteObserver;
  /** Calls to Omni in flight at most (`--concurrency`; default CALL_LIMIT_DEFAULTS.max). */
  concurrency?: number;
  /** How writes ride out back-pressure (pressure.ts); the most in flight is `concurrency`. */
  backPressure?: Partial<Omit<BackPressureOptions, 'maxWritesInFlight' | 'logger' | 'now' | 'delay' | 'random'>>;
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
  const { key: _key, onWrite, backPressure, concurrency: _c, ...transportOpts } = opts;
  const gate = new CallGate(opts.concurrency ?? CALL_LIMIT_DEFAULTS.max);
  const transport = new Transport({ ...transportOpts, connections: gate.max, signer, logger, now });
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
  const gateway = new GatewayState(transport, { ...timing, ...(onWrite ? { onWrite } : {}) });
  const pressured = withBackPressure(withCallLimit(gateway, gate), {
    ...backPressure,
    maxWritesInFlight: gate.max,
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
