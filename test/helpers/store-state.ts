// The sim's COSI store (src/omni-sim/store/store.ts SimStore) as a CoreState of the client's
// (src/omni-api/state.ts) in process: no HTTP, no access rules, and the client's own defaults
// (an Update or Create owner defaults to the resource's, kind watches are aggregated with bootstrap
// contents and the bootstrap bookmark, api_version 1). Teardown, removeFinalizers and
// update-with-conflicts come from the client's one implementation (src/omni-client/wrap.ts:
// `wrapCore(new StoreState())`), as for the gateway. The provider tests' double (fake-state.ts) is
// built on it, and the State conformance suite (test/omni-api/state-conformance.test.ts) runs
// against it beside the double and the real client.

import type { Pointer, Resource } from '../../src/omni-api/resource.js';
import type {
  CallOptions,
  CoreState,
  LabelQuery,
  OwnerOptions,
  QueryOptions,
  UpdateOptions,
  WatchEvent,
  WatchEventType,
  WatchKindOptions,
} from '../../src/omni-api/state.js';
import { LabelTermOperation } from '../../src/omni-api/wire.js';
import type { Identity, Query } from '../../src/omni-sim/api.js';
import { SimStore } from '../../src/omni-sim/store/store.js';

const WHO: Identity = { name: 'test', email: 'test', role: 'Admin', internal: true };
const EVENT_TYPES: WatchEventType[] = ['created', 'updated', 'destroyed', 'bootstrapped', 'errored', 'noop'];

export function queryOf(labelQueries: LabelQuery[] | undefined, idRegexp: string | undefined): Query {
  return {
    labelQueries: (labelQueries ?? []).map((terms) =>
      terms.map((t) => ({
        key: t.key,
        op: LabelTermOperation[t.op],
        value: [...(t.value ?? [])],
        invert: t.invert ?? false,
      })),
    ),
    idRegexp: idRegexp ?? '',
  };
}

export class StoreState implements CoreState {
  readonly store: SimStore;

  constructor(store?: SimStore) {
    this.store = store ?? new SimStore({ clock: { now: Date.now } });
  }

  get(p: Pointer, _opts?: CallOptions): Promise<Resource> {
    return this.call(() => this.store.get(WHO, p));
  }

  list(namespace: string, type: string, opts: QueryOptions = {}): Promise<Resource[]> {
    return this.call(() => this.store.list(WHO, namespace, type, queryOf(opts.labelQueries, opts.idRegexp)));
  }

  create(r: Resource, opts: OwnerOptions = {}): Promise<Resource> {
    return this.call(() => this.store.create(WHO, r, opts.owner ?? r.metadata.owner));
  }

  update(r: Resource, opts: UpdateOptions = {}): Promise<Resource> {
    return this.call(() => this.store.update(WHO, r, opts.owner ?? r.metadata.owner, opts.expectedPhase));
  }

  destroy(p: Pointer, opts: OwnerOptions = {}): Promise<void> {
    return this.call(() => this.store.destroy(WHO, p, opts.owner ?? ''));
  }

  watchKind(namespace: string, type: string, opts: WatchKindOptions = {}): AsyncIterable<WatchEvent[]> {
    const store = this.store;
    return {
      async *[Symbol.asyncIterator]() {
        const ac = new AbortController();
        const onAbort = () => ac.abort();
        opts.signal?.addEventListener('abort', onAbort, { once: true });
        try {
          const batches = store.watch(
            WHO,
            {
              namespace,
              type,
              bootstrapContents: opts.bootstrapContents ?? true,
              tailEvents: 0,
              query: queryOf(opts.labelQueries, opts.idRegexp),
              aggregated: true,
              bootstrapBookmark: true,
              apiVersion: 1,
            },
            ac.signal,
          );
          for await (const batch of batches) {
            if (opts.signal?.aborted) return;
            yield batch.map((e): WatchEvent => ({
              type: EVENT_TYPES[e.eventType] ?? 'noop',
              resource: e.resource,
              ...(e.old ? { old: e.old } : {}),
              ...(e.error !== undefined ? { error: e.error } : {}),
              ...(e.bookmark ? { bookmark: e.bookmark } : {}),
            }));
          }
        } finally {
          opts.signal?.removeEventListener('abort', onAbort);
          ac.abort();
        }
      },
    };
  }

  /** Async like a remote call: the caller never sees a result in the same tick, nor a synchronous throw. */
  private async call<T>(f: () => T): Promise<T> {
    await Promise.resolve();
    return f();
  }
}
