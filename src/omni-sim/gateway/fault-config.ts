// What faults the simulated Omni injects (FaultConfig, the settings Faults in faults.ts applies) and
// their scenario form: a scenario's `faults:` map and `stub-provider sim --faults`, snake_case keys,
// read strictly (every error names the key) and written back the same way for dumps. Apart from
// faults.ts because it is the settings' vocabulary, shared with the scenario reader, while faults.ts
// is their effect on a running gateway.

import { CALLER_CLASSES, type CallerClass, type ClassBudget, type ThrottleConfig } from './throttle.js';
import type { ProxyLimitConfig } from './proxy-limit.js';

/** Which resources a fault applies to: each field left out matches any. */
export interface ResourceFilter {
  type?: string;
  namespace?: string;
  id?: string;
}

export interface ConflictStorm extends ResourceFilter {
  /** Which resources: type required; namespace and ID optional (any). */
  type: string;
  /** How many client Updates of a matching resource lose the race (version bumped just before). */
  count: number;
}

/** The gateway calls that write. */
export const WRITE_METHODS = ['Create', 'Update', 'Destroy', 'Teardown', 'TeardownAndDestroy'] as const;
export type WriteMethod = (typeof WRITE_METHODS)[number];

export interface LostWriteAnswers extends ResourceFilter {
  /** How many more matching client writes are applied and then lose their answer. */
  count: number;
  /** Only this kind of write; any when left out. */
  method?: WriteMethod;
}

export interface FaultConfig {
  /** Added before every gateway call is handled. */
  latencyMs?: number;
  /** Each Watch stream is cut (connection destroyed) once it has delivered this many events. */
  dropWatchAfterEvents?: number;
  /** Moves the server clock: its Date header, its timestamps and its signature skew check. */
  clockOffsetMs?: number;
  /** The next N calls answer 503 / Unavailable. */
  unavailableBurst?: number;
  conflictStorm?: ConflictStorm;
  /** Omni's etcd write throttle (throttle.ts). */
  throttle?: ThrottleConfig;
  /** A proxy in front of Omni that limits requests (throttle.ts). */
  proxyLimit?: ProxyLimitConfig;
  /**
   * The next `count` client writes that succeed (of `method`, on matching resources) are applied and
   * their connection destroyed before any byte of the answer: the client cannot tell whether it
   * took effect.
   */
  loseWriteAnswers?: LostWriteAnswers;
}

export class FaultConfigError extends Error {
  readonly code = 'SIM_SCENARIO_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'FaultConfigError';
  }
}

const INT_KEYS = {
  latency_ms: 'latencyMs',
  drop_watch_after_events: 'dropWatchAfterEvents',
  clock_offset_ms: 'clockOffsetMs',
  unavailable_burst: 'unavailableBurst',
} as const;

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const CLASS_KEYS: Record<string, CallerClass> = { user: 'user', infra_provider: 'infraProvider', internal: 'internal' };
const CLASS_PLAIN = Object.fromEntries(Object.entries(CLASS_KEYS).map(([k, v]) => [v, k])) as Record<
  CallerClass,
  string
>;

function int(x: unknown, p: string, min = 0): number {
  if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < min)
    throw new FaultConfigError(`${p}: expected ${min > 0 ? 'a positive' : 'a non-negative'} integer`);
  return x;
}

function budgetFromPlain(x: unknown, p: string): ClassBudget {
  if (!isMap(x)) throw new FaultConfigError(`${p}: expected a map with bytes_per_second and burst`);
  const out: Partial<ClassBudget> = {};
  for (const [k, v] of Object.entries(x)) {
    if (k === 'bytes_per_second') out.bytesPerSecond = int(v, `${p}.${k}`, 1);
    else if (k === 'burst') out.burst = int(v, `${p}.${k}`, 1);
    else throw new FaultConfigError(`${p}.${k}: unknown key (known: bytes_per_second, burst)`);
  }
  if (out.bytesPerSecond === undefined || out.burst === undefined)
    throw new FaultConfigError(`${p}: bytes_per_second and burst are required`);
  return out as ClassBudget;
}

/** `throttle: { max_wait_ms, user | infra_provider | internal: { bytes_per_second, burst } }`. */
function throttleFromPlain(x: unknown, p: string): ThrottleConfig {
  if (!isMap(x))
    throw new FaultConfigError(`${p}: expected a map (keys: max_wait_ms, ${Object.keys(CLASS_KEYS).join(', ')})`);
  const out: ThrottleConfig = {};
  for (const [k, v] of Object.entries(x)) {
    if (k === 'max_wait_ms') out.maxWaitMs = int(v, `${p}.${k}`);
    else if (Object.hasOwn(CLASS_KEYS, k)) out[CLASS_KEYS[k] as CallerClass] = budgetFromPlain(v, `${p}.${k}`);
    else
      throw new FaultConfigError(`${p}.${k}: unknown key (known: max_wait_ms, ${Object.keys(CLASS_KEYS).join(', ')})`);
  }
  return out;
}

/** `proxy_limit: { requests_per_second, burst, status: 429 | 503, retry_after_s }`. */
function proxyLimitFromPlain(x: unknown, p: string): ProxyLimitConfig {
  const known = 'requests_per_second, burst, status, retry_after_s';
  if (!isMap(x)) throw new FaultConfigError(`${p}: expected a map (keys: ${known})`);
  const out: Partial<ProxyLimitConfig> = {};
  for (const [k, v] of Object.entries(x)) {
    const q = `${p}.${k}`;
    if (k === 'requests_per_second') {
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
        throw new FaultConfigError(`${q}: expected a non-negative number`);
      out.requestsPerSecond = v;
    } else if (k === 'burst') out.burst = int(v, q);
    else if (k === 'status') {
      if (v !== 429 && v !== 503) throw new FaultConfigError(`${q}: expected 429 or 503`);
      out.status = v;
    } else if (k === 'retry_after_s') out.retryAfterS = int(v, q);
    else throw new FaultConfigError(`${q}: unknown key (known: ${known})`);
  }
  if (out.requestsPerSecond === undefined || out.burst === undefined)
    throw new FaultConfigError(`${p}: requests_per_second and burst are required`);
  return out as ProxyLimitConfig;
}

/** `{type, namespace, id, count}` (and `method` when allowed): count required, the rest optional strings. */
function countedFilterFromPlain(x: unknown, p: string, extra: 'method'[]): LostWriteAnswers {
  const known = ['type', 'namespace', 'id', ...extra, 'count'];
  if (!isMap(x))
    throw new FaultConfigError(`${p}: expected ${extra.length > 0 ? 'a count or ' : ''}a map with ${known.join(', ')}`);
  const out: Partial<LostWriteAnswers> = {};
  for (const [k, v] of Object.entries(x)) {
    const q = `${p}.${k}`;
    if (k === 'count') out.count = int(v, q);
    else if (k === 'method' && extra.includes('method')) {
      if (!(WRITE_METHODS as readonly unknown[]).includes(v))
        throw new FaultConfigError(`${q}: expected one of ${WRITE_METHODS.join(', ')}`);
      out.method = v as WriteMethod;
    } else if (k === 'type' || k === 'namespace' || k === 'id') {
      if (typeof v !== 'string') throw new FaultConfigError(`${q}: expected a string`);
      out[k] = v;
    } else throw new FaultConfigError(`${q}: unknown key (known: ${known.join(', ')})`);
  }
  if (out.count === undefined)
    throw new FaultConfigError(`${p}: ${extra.length > 0 ? 'count is required' : 'type and count are required'}`);
  return out as LostWriteAnswers;
}

/** Parses a scenario's `faults:` map; errors name the key under `path`. */
export function faultConfigFromPlain(v: unknown, path: string): FaultConfig {
  if (v === null || v === undefined) return {};
  if (!isMap(v)) throw new FaultConfigError(`${path}: expected a map`);
  const out: FaultConfig = {};
  for (const [k, x] of Object.entries(v)) {
    if (Object.hasOwn(INT_KEYS, k)) {
      const allowNegative = k === 'clock_offset_ms';
      if (typeof x !== 'number' || !Number.isSafeInteger(x) || (!allowNegative && x < 0)) {
        throw new FaultConfigError(`${path}.${k}: expected ${allowNegative ? 'an integer' : 'a non-negative integer'}`);
      }
      out[INT_KEYS[k as keyof typeof INT_KEYS]] = x;
    } else if (k === 'conflict_storm') {
      const storm = countedFilterFromPlain(x, `${path}.${k}`, []);
      if (storm.type === undefined) throw new FaultConfigError(`${path}.${k}: type and count are required`);
      out.conflictStorm = storm as ConflictStorm;
    } else if (k === 'lose_write_answers') {
      // A bare count: any write; a map narrows it to a method and resources.
      out.loseWriteAnswers =
        typeof x === 'number'
          ? { count: int(x, `${path}.${k}`) }
          : countedFilterFromPlain(x, `${path}.${k}`, ['method']);
    } else if (k === 'throttle') {
      out.throttle = throttleFromPlain(x, `${path}.${k}`);
    } else if (k === 'proxy_limit') {
      out.proxyLimit = proxyLimitFromPlain(x, `${path}.${k}`);
    } else {
      const known = [...Object.keys(INT_KEYS), 'conflict_storm', 'throttle', 'proxy_limit', 'lose_write_answers'];
      throw new FaultConfigError(`${path}.${k}: unknown fault (known: ${known.join(', ')})`);
    }
  }
  return out;
}

export function faultConfigToPlain(c: FaultConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, field] of Object.entries(INT_KEYS)) if (c[field] !== undefined) out[k] = c[field];
  if (c.conflictStorm) out['conflict_storm'] = { ...c.conflictStorm };
  if (c.loseWriteAnswers) {
    const l = c.loseWriteAnswers;
    out['lose_write_answers'] = Object.keys(l).length === 1 ? l.count : { ...l };
  }
  if (c.throttle) {
    const t: Record<string, unknown> = {};
    if (c.throttle.maxWaitMs !== undefined) t['max_wait_ms'] = c.throttle.maxWaitMs;
    for (const cls of CALLER_CLASSES) {
      const b = c.throttle[cls];
      if (b) t[CLASS_PLAIN[cls]] = { bytes_per_second: b.bytesPerSecond, burst: b.burst };
    }
    out['throttle'] = t;
  }
  if (c.proxyLimit) {
    const l = c.proxyLimit;
    out['proxy_limit'] = {
      requests_per_second: l.requestsPerSecond,
      burst: l.burst,
      ...(l.status !== undefined ? { status: l.status } : {}),
      ...(l.retryAfterS !== undefined ? { retry_after_s: l.retryAfterS } : {}),
    };
  }
  return out;
}
