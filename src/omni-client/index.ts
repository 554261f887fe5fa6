// The Omni API client's public surface.

export * from './errors.js';
export * from '../omni-api/resource.js';
export type * from '../omni-api/state.js';
export { createOmniClient, type OmniClient, type OmniClientOptions } from './client.js';
export {
  loadServiceAccountKey,
  parseServiceAccountKey,
  keyFromEnv,
  signaturePayload,
  Signer,
  ENV_KEY_NAMES,
  type KeySource,
  type ServiceAccountKey,
} from './transport/auth.js';
export { GatewayState, type GatewayStateOptions, type StateTransport } from './gateway-state.js';
export { wrapCore, type ConflictPolicy } from './wrap.js';
export {
  WriteWindow, withBackPressure, classifyWriteFailure, createVerdict, destroyVerdict, updateVerdict,
  type BackPressureOptions, type BackPressureState, type ThrottlingStats, type Verdict, type WriteFailure,
} from './write/pressure.js';
export { DEFAULT_READ_LIMITS, type ReadLimits } from './transport/body.js';
export { observeWrite, outcomeOf, type WriteIntent, type WriteObserver, type WriteOutcome } from './write/observer.js';
export { Transport, type OpenStream, type TransportOptions } from './transport/transport.js';
export type { CallContext } from './transport/call.js';
export { MAX_ADOPTED_OFFSET_MS } from './transport/clock.js';
export { normalizeEndpoint, type Endpoint } from './transport/endpoint.js';
export { jitteredBackoff, type DelayFn } from './transport/retry.js';
