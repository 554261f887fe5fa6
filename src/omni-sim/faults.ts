// Fault injection for the simulated Omni, set per scenario (`faults:`) or changed by a test at run
// time. Every fault imitates something a client meets in production: a slow Omni, a proxy cutting
// long streams, a skewed server clock, a rolling restart (503 bursts, broken streams, bookmarks from
// before it refused: etcd's history compacted, the in-memory backend's cookie new), and controllers
// racing the client on the same resource.

import type { Pointer } from '../omni-client/resource.js';
import type { SimClock } from './api.js';

export interface ConflictStorm {
  /** Which resources: type required; namespace and ID optional (any). */
  type: string;
  namespace?: string;
  id?: string;
  /** How many client Updates of a matching resource lose the race (version bumped just before). */
  count: number;
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

  constructor(base: SimClock = { now: () => Date.now() }, config: FaultConfig = {}, private readonly delay: Delay = sleep) {
    this.clock = { now: () => base.now() + (this.cfg.clockOffsetMs ?? 0) };
    this.set(config);
  }

  /** Merges settings; a key set to undefined switches that fault off. */
  set(config: FaultConfig): void {
    const next: FaultConfig = { ...this.cfg, ...config };
    for (const k of Object.keys(next) as (keyof FaultConfig)[]) if (next[k] === undefined) delete next[k];
    if (next.conflictStorm) next.conflictStorm = { ...next.conflictStorm };
    this.cfg = next;
  }

  reset(): void {
    this.cfg = {};
  }

  get config(): FaultConfig {
    return { ...this.cfg, ...(this.cfg.conflictStorm ? { conflictStorm: { ...this.cfg.conflictStorm } } : {}) };
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
    if (!s || s.count <= 0 || s.type !== p.type) return;
    if (s.namespace !== undefined && s.namespace !== p.namespace) return;
    if (s.id !== undefined && s.id !== p.id) return;
    let bumped = false;
    for (const t of this.targets) bumped = t.bumpVersion(p) || bumped;
    if (bumped) s.count--;
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
      if (!isMap(x)) throw new FaultConfigError(`${path}.${k}: expected a map with type and count`);
      const storm: Partial<ConflictStorm> = {};
      for (const [sk, sv] of Object.entries(x)) {
        const p = `${path}.${k}.${sk}`;
        if (sk === 'count') {
          if (typeof sv !== 'number' || !Number.isSafeInteger(sv) || sv < 0) throw new FaultConfigError(`${p}: expected a non-negative integer`);
          storm.count = sv;
        } else if (sk === 'type' || sk === 'namespace' || sk === 'id') {
          if (typeof sv !== 'string') throw new FaultConfigError(`${p}: expected a string`);
          storm[sk] = sv;
        } else throw new FaultConfigError(`${p}: unknown key (known: type, namespace, id, count)`);
      }
      if (storm.type === undefined || storm.count === undefined) throw new FaultConfigError(`${path}.${k}: type and count are required`);
      out.conflictStorm = storm as ConflictStorm;
    } else {
      throw new FaultConfigError(`${path}.${k}: unknown fault (known: ${[...Object.keys(INT_KEYS), 'conflict_storm'].join(', ')})`);
    }
  }
  return out;
}

export function faultConfigToPlain(c: FaultConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, field] of Object.entries(INT_KEYS)) if (c[field] !== undefined) out[k] = c[field];
  if (c.conflictStorm) out['conflict_storm'] = { ...c.conflictStorm };
  return out;
}
