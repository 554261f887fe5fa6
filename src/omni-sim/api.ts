// Contracts between the parts of the simulated Omni:
//   gateway/server.ts    --authenticates with-->  access/siderov1.ts, access/identities.ts
//   gateway              --calls-->               StateApi of access/access.ts (Omni's access rules for the caller)
//   access               --delegates to-->        StateApi of store/store.ts (COSI state semantics, no access rules)
//   controllers/         --uses-->                the store directly as Omni's internal actor, and its events
// Errors are thrown as the typed errors of src/omni-api/errors.ts (errorFromStatus), carrying the
// gRPC code and message Omni would send; the gateway maps them to HTTP.

import type { Pointer, Resource } from '../omni-api/resource.js';

export type Role = 'None' | 'InfraProvider' | 'Reader' | 'Auditor' | 'Operator' | 'Admin';

/** Role order of docs/omni-wire.md 3.4: None < InfraProvider < Reader < Auditor (1.10.0+) < Operator < Admin. */
export const ROLE_RANK: Record<Role, number> = {
  None: 0,
  InfraProvider: 1,
  Reader: 2,
  Auditor: 3,
  Operator: 4,
  Admin: 5,
};

/** Roles that an Omni release introduced: before it they do not exist (docs/omni-wire.md 3.4). */
export const ROLE_SINCE: Partial<Record<Role, string>> = { Auditor: '1.10.0' };

export interface Identity {
  /** The scenario name: `infra-provider:<id>` for providers, an e-mail for users. */
  name: string;
  /** What Omni stores for the key: `<id>@infra-provider.serviceaccount.omni.sidero.dev` for providers. */
  email: string;
  role: Role;
  /** Set for role InfraProvider: the part of the e-mail before `@infra-provider.serviceaccount...`. */
  providerId?: string;
  /** Omni's own controllers: no access rules. */
  internal?: boolean;
}

export const INTERNAL: Identity = { name: 'omni-internal', email: 'internal', role: 'Admin', internal: true };

/** One decoded LabelTerm (op as its enum number, see wire.ts LabelTermOperation). */
export interface LabelTermQ {
  key: string;
  op: number;
  value: string[];
  invert: boolean;
}

/** Queries OR-ed, terms inside a query AND-ed (docs/omni-wire.md 2.6). */
export interface Query {
  labelQueries: LabelTermQ[][];
  /** RE2-like, unanchored; empty = no filter. */
  idRegexp: string;
}

export interface WatchParams {
  namespace: string;
  type: string;
  /** Present = single-resource watch (even when ""). */
  id?: string;
  bootstrapContents: boolean;
  tailEvents: number;
  query: Query;
  aggregated: boolean;
  startFromBookmark?: Uint8Array;
  bootstrapBookmark: boolean;
  apiVersion: number;
}

/** EventType numbers of wire.ts EventType. */
export interface SimEvent {
  eventType: number;
  resource: Resource;
  old?: Resource;
  error?: string;
  bookmark?: Uint8Array;
}

/** A watch: yields batches (one event each unless aggregated; aggregated batches may be empty). */
export type WatchBatches = AsyncIterable<SimEvent[]>;

export interface StateApi {
  get(who: Identity, p: Pointer): Resource;
  list(who: Identity, namespace: string, type: string, q: Query): Resource[];
  create(who: Identity, r: Resource, owner: string): Resource;
  /** `expectedPhase` undefined = any phase. */
  update(who: Identity, r: Resource, owner: string, expectedPhase?: string): Resource;
  destroy(who: Identity, p: Pointer, owner: string): void;
  /** Returns destroy-readiness. */
  teardown(who: Identity, p: Pointer, owner: string): boolean;
  teardownAndDestroy(who: Identity, p: Pointer, owner: string, signal: AbortSignal): Promise<void>;
  /** Validation errors (bad options, bad bookmark) are thrown synchronously, before any batch. */
  watch(who: Identity, params: WatchParams, signal: AbortSignal): WatchBatches;
  /**
   * The stored resource as the system sees it (no access check, NO copy: read it, never change it),
   * or undefined: for Omni's own validations and access checks, which only look.
   */
  view(p: Pointer): Readonly<Resource> | undefined;
}

/** The sim's clock; a clock-offset fault moves `now` (and so the Date header and skew check) together. */
export interface SimClock {
  now(): number;
}
