// What the caches of a run are given (cache.ts builds one kind-cache.ts per kind): the run's options,
// the caches' bounds and timings, what a kind's cache needs of the run's caches, and a wait on one ID.

import type { State } from '../../omni-api/state.js';
import type { StoreHost } from './kind-store.js';
import type { WaitOutcome, WaitUntil } from './reads.js';
import type { Logger } from 'pino';

export interface CacheOptions {
  providerId: string;
  /** Told when a kind's watch is given up for Lists. */
  logger?: Logger;
  /** Keep every kind up to date with a Watch (a run); false: one List per kind, nothing after (`plan`). */
  live: boolean;
  signal?: AbortSignal;
  /**
   * How long a new watch may take to say it is established before the List goes anyway (Omni before 1.0 filters that
   * NOOP out).
   */
  establishMs?: number;
  /** Resources kept of one kind at most, and events held while its List is read (design rule 12). */
  maxPerKind?: number;
}

/** The caches' bounds, retries and timings, in one place (docs/architecture.md, "A write, layer by layer"). */
export const CACHE_DEFAULTS = {
  /** How long a new watch may take to say it is established before its List goes anyway. */
  establishMs: 1_000,
  /** As many as one List may hold (`--max-list-items`' default). */
  maxPerKind: 250_000,
  /** Times a kind whose watch or List failed is started again, on the next query, before the failure stays. */
  restarts: 3,
  /** Streams in a row that broke before delivering anything, after which a kind is read with Lists instead. */
  unstableBreaks: 3,
  /** Between two Lists of a kind read without a watch while someone waits: at least this, twice the last List. */
  pollMinMs: 1_000,
  pollMaxMs: 30_000,
} as const;

export interface Waiter {
  until: WaitUntil;
  minVersion: bigint;
  resolve: (o: WaitOutcome) => void;
  reject: (e: unknown) => void;
}

/** What a kind's cache needs of the run's caches. */
export interface KindHost extends StoreHost {
  readonly state: State;
  readonly o: CacheOptions;
  /** The kind's watch stops with the run. */
  linkAbort(ac: AbortController): void;
  /** What the caches hold changed (--wait plans again). */
  markChanged(): void;
  /** How many resources of `type` its List has brought so far (while it streams). */
  listProgress(type: string, count: number): void;
}
