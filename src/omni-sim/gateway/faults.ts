// Fault injection for the simulated Omni, set per scenario (`faults:`) or changed by a test at run
// time. Every fault imitates something a client meets in production: a slow Omni, a proxy cutting
// long streams, a skewed server clock, a rolling restart (503 bursts, broken streams, bookmarks from
// before it refused: etcd's history compacted, the in-memory backend's cookie new), and controllers
// racing the client on the same resource, back-pressure: Omni 1.9's write budget per caller class
// (throttle.ts), and a proxy that answers 429 or 503 with Retry-After (proxy-limit.ts); and a write
// whose answer is lost (applied, then the connection drops: a proxy or Omni restarting between commit
// and reply). This file applies them to a running gateway; what can be set, and its scenario form, is
// fault-config.ts.

import type { Pointer } from '../../omni-api/resource.js';
import type { Identity, SimClock } from '../api.js';
import type { FaultConfig, ResourceFilter } from './fault-config.js';
import { ProxyLimit } from './proxy-limit.js';
import { WriteThrottle } from './throttle.js';

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
