// Fault injection for the simulated Omni, set per scenario (`faults:`) or changed by a test at run
// time. Every fault imitates something a client meets in production: a slow Omni, a proxy cutting
// long streams, a skewed server clock, a rolling restart (503 bursts, broken streams, bookmarks from
// before it refused: etcd's history compacted, the in-memory backend's cookie new), and controllers
// racing the client on the same resource, back-pressure (throttle.ts): Omni 1.9's write budget
// per caller class, and a proxy that answers 429 or 503 with Retry-After; and a write whose answer is
// lost (applied, then the connection drops: a proxy or Omni restarting between commit and reply).

import type { Pointer } from '../../omni-api/resource.js';
import type { Identity, SimClock } from '../api.js';
import {
  CALLER_CLASSES,
  ProxyLimit,
  WriteThrottle,
  type CallerClass,
  type ClassBudget,
  type ProxyLimitConfig,
  type ThrottleConfig,
} from './throttle.js';

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

function matches(f: ResourceFilter, p: Pointer): boolean {
  return (
    (f.type === undefined || f.type === p.type) &&
    (f.namespace === undefined || f.namespace === p.namespace) &&
    (f.id === undefined || f.id === p.id)
  );
}

/** What a restart acts on (wired by index.ts). */
export interface RestartTarget {
  /** Open watches broken; the bookmarks issued so far refused (store.ts). */
  restart(): void;
  /** Every open watch gets an ERRORED event, then ends. */
  failWatches(error: string): void;
  /** Cuts every open stream connection of the gateway. */
  breakStreams(): void;
}

/** What a conflict storm acts on: a writer that bumps versions (SimStore.bumpVersion). */
export interface VersionBumper {
  bumpVersion(p: Pointer): boolean;
}

export type Delay = (ms: number) => Promise<void>;
const sleep: Delay = (ms) => new Promise((r) => setTimeout(r, ms));

export class FaultConfigError extends Error {
  readonly code = 'SIM_SCENARIO_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'FaultConfigError';
  }
}

export class Faults {
  /** The sim's clock: the base clock plus the configured offset. */
  readonly clock: SimClock;
  private cfg: FaultConfig = {};
  private targets: (RestartTarget & VersionBumper)[] = [];
  private restarts = 0;
  private lost = 0;
  private writeThrottle: WriteThrottle | undefined;
  private requestLimit: ProxyLimit | undefined;

  /** `monotonic`: the clock of the throttles' buckets and deadlines (ms). */
  constructor(
    base: SimClock = { now: () => Date.now() },
    config: FaultConfig = {},
    private readonly delay: Delay = sleep,
    private readonly monotonic: () => number = () => performance.now(),
  ) {
    this.clock = { now: () => base.now() + (this.cfg.clockOffsetMs ?? 0) };
    this.set(config);
  }

  /** Merges settings; a key set to undefined switches that fault off. A throttle set anew starts with full buckets. */
  set(config: FaultConfig): void {
    const next: FaultConfig = { ...this.cfg, ...config };
    for (const k of Object.keys(next) as (keyof FaultConfig)[]) if (next[k] === undefined) delete next[k];
    if (next.conflictStorm) next.conflictStorm = { ...next.conflictStorm };
    if (next.loseWriteAnswers) next.loseWriteAnswers = { ...next.loseWriteAnswers };
    this.cfg = next;
    if (Object.hasOwn(config, 'throttle'))
      this.writeThrottle = next.throttle ? new WriteThrottle(next.throttle, this.monotonic) : undefined;
    if (Object.hasOwn(config, 'proxyLimit'))
      this.requestLimit = next.proxyLimit ? new ProxyLimit(next.proxyLimit, this.monotonic) : undefined;
  }

  reset(): void {
    this.cfg = {};
    this.writeThrottle = undefined;
    this.requestLimit = undefined;
  }

  get config(): FaultConfig {
    return structuredClone(this.cfg);
  }

  /** Omni's write throttle, when configured (its counters: `.stats()`). */
  get throttle(): WriteThrottle | undefined {
    return this.writeThrottle;
  }

  /** The proxy's request limit, when configured. */
  get proxyLimit(): ProxyLimit | undefined {
    return this.requestLimit;
  }

  /** The monotonic time (ms) of the throttles' clock. */
  now(): number {
    return this.monotonic();
  }

  /** How many write answers were lost so far (loseWriteAnswers; not reset by `reset`). */
  get lostWriteAnswers(): number {
    return this.lost;
  }

  /** How many restarts have been simulated. */
  get restartCount(): number {
    return this.restarts;
  }

  attach(target: RestartTarget & VersionBumper): void {
    this.targets.push(target);
  }

  /** A restart that keeps state: every open stream breaks and every bookmark issued before it is refused. */
  restart(): void {
    this.restarts++;
    for (const t of this.targets) {
      t.restart();
      t.breakStreams();
    }
  }

  /** Every open watch receives an ERRORED event carrying `error` (Omni: e.g. "buffer overrun") and ends. */
  failWatches(error = 'buffer overrun'): void {
    for (const t of this.targets) t.failWatches(error);
  }

  // --- hooks the gateway calls ------------------------------------------------------------

  async beforeCall(): Promise<void> {
    const ms = this.cfg.latencyMs ?? 0;
    if (ms > 0) await this.delay(ms);
  }

  /** Waits `ms` for a throttled write; false when `gone` resolves first (the caller went away). */
  async waitForBudget(ms: number, gone: Promise<void>): Promise<boolean> {
    return Promise.race([this.delay(ms).then(() => true), gone.then(() => false)]);
  }

  /** The etcd state's write hook (store.ts): see WriteThrottle.gate. */
  gateWrite(who: Identity, type: string, bytes: () => number): void {
    this.writeThrottle?.gate(who, type, bytes);
  }

  /** True when this call must answer Unavailable (consumes one from the burst). */
  takeUnavailable(): boolean {
    const n = this.cfg.unavailableBurst ?? 0;
    if (n <= 0) return false;
    this.cfg.unavailableBurst = n - 1;
    return true;
  }

  /** Before a client Update: a storm bumps the resource's version so the client's read is stale. */
  beforeUpdate(p: Pointer): void {
    const s = this.cfg.conflictStorm;
    if (!s || s.count <= 0 || !matches(s, p)) return;
    let bumped = false;
    for (const t of this.targets) bumped = t.bumpVersion(p) || bumped;
    if (bumped) s.count--;
  }

  /** After a client write on `p` succeeded: true when its answer must be lost (consumes one). */
  takeLostAnswer(method: string, p: Pointer): boolean {
    const l = this.cfg.loseWriteAnswers;
    if (!l || l.count <= 0 || (l.method !== undefined && l.method !== method) || !matches(l, p)) return false;
    l.count--;
    this.lost++;
    return true;
  }

  dropWatchAfterEvents(): number | undefined {
    const n = this.cfg.dropWatchAfterEvents;
    return n !== undefined && n >= 0 ? n : undefined;
  }
}

// --- scenario form (snake_case keys) ----------------------------------------------------------

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
