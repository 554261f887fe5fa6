// A kind's watch over the gateway (GatewayState.watchKind): one Watch stream after another, resumed from the last
// bookmark after a break, bootstrapped again from scratch when Omni refuses the bookmark, and given up after
// WATCH_DEFAULTS' reconnects in a row without a message. Apart from gateway-state.ts because it is the one call
// that lives across reconnects, with its own state and its own retry; the other calls are one request, one answer.

import type { Logger } from 'pino';
import { FailedPreconditionError, WatchErroredError } from '../omni-api/errors.js';
import { TransportError, brokeInTransit, hasCode } from './errors.js';
import type { Pointer } from '../omni-api/resource.js';
import { jitteredBackoff, type BackoffOptions, type DelayFn } from './transport/retry.js';
import type { OpenStream, Transport } from './transport/transport.js';
import { SKIPPED } from './transport/ndjson.js';
import type { WatchEvent, WatchKindOptions } from '../omni-api/state.js';
import { WatchRequestSchema, fullMethod } from '../omni-api/wire.js';
import { encodeMessage } from '../omni-api/protojson.js';
import { decodeEvents } from './answers.js';

/** A watch's reconnects and their backoff. */
export interface WatchRetry {
  /** Backoff between watch reconnects. */
  watchBackoff: BackoffOptions;
  /** Consecutive failed watch reconnects (no message in between) before giving up. */
  watchMaxReconnects: number;
  /** A stream that lived this long (ms) before it broke counts as established (`onBreak`). */
  watchStableMs: number;
}

/** The watches' retries and their backoff, in one place (docs/architecture.md, "A write, layer by layer"). */
export const WATCH_DEFAULTS = {
  watchBackoff: { baseMs: 250, capMs: 15_000 },
  watchMaxReconnects: 10,
  watchStableMs: 30_000,
} as const satisfies WatchRetry;

/** What a watch runs on: the transport's streams, the log, the pause between reconnects and its retry. */
export interface WatchHost {
  t: Pick<Transport, 'openStream'>;
  log: Logger;
  delay: DelayFn;
  random: () => number;
  retry: WatchRetry;
}

/** How one stream of the watch ended: why, how many events it carried, and since when it was open. */
interface StreamEnd {
  failure: unknown;
  eventsOnStream: number;
  openedAt: number | undefined;
}

/** One kind's watch, across its streams: where it resumes from and how it broke so far. */
export class KindWatch {
  #bookmark: Uint8Array | undefined;
  #deliveredSinceStart = false;
  #failures = 0;
  #quickBreaks = 0;
  readonly #kind: Pointer;
  readonly #query: Record<string, unknown>;

  constructor(
    private readonly host: WatchHost,
    namespace: string,
    type: string,
    query: Record<string, unknown>,
    private readonly opts: WatchKindOptions,
  ) {
    this.#kind = { namespace, type, id: '' };
    this.#query = query;
  }

  async *events(): AsyncGenerator<WatchEvent[]> {
    const signal = this.opts.signal;
    for (;;) {
      if (signal?.aborted) return;
      const end = yield* this.#stream();
      if (end === undefined) return;
      this.#afterBreak(end.failure);
      const stayed =
        end.eventsOnStream > 0 ||
        (end.openedAt !== undefined && performance.now() - end.openedAt >= this.host.retry.watchStableMs);
      this.#quickBreaks = stayed ? 0 : this.#quickBreaks + 1;
      this.opts.onBreak?.(this.#quickBreaks);
      if (signal?.aborted) return;
      this.#failures++;
      if (this.#failures > this.host.retry.watchMaxReconnects) throw end.failure;
      if (!(await this.#pause(end.failure))) return;
    }
  }

  /** One Watch stream, its events yielded as they come; how it ended, or undefined when the caller's signal did. */
  async *#stream(): AsyncGenerator<WatchEvent[], StreamEnd | undefined> {
    const { namespace, type } = this.#kind;
    const { signal, timeoutMs } = this.opts;
    // Resuming: no bootstrap, just the events after the bookmark (like the Go client's retry).
    const resumed = this.#bookmark !== undefined;
    let eventsOnStream = 0;
    // A resumed stream's first message is always read: it may be the ERRORED event of a refused bookmark.
    let readOnStream = !resumed;
    const skip = this.opts.skip && ((): boolean => readOnStream && this.opts.skip!());
    let stream: OpenStream<WatchEvent[]> | undefined;
    let failure: unknown;
    let openedAt: number | undefined;
    try {
      // Every message is decoded as it arrives: a malformed one ends the watch with a ProtocolError
      // (not a broken stream: reconnecting would only read it again).
      stream = await this.host.t.openStream(
        'Watch',
        this.#request(),
        { signal, timeoutMs, resource: this.#kind },
        (msg) => decodeEvents(msg, { namespace, type }, this.opts.previous ?? true),
        skip,
      );
      openedAt = performance.now();
      // The first message only says that the watch is established (docs/cosi-semantics.md, "Watches"); dropped.
      for await (const events of stream) {
        this.#failures = 0;
        if (events === SKIPPED) {
          eventsOnStream++;
          this.opts.onSkipped?.();
          continue;
        }
        readOnStream = true;
        const erroredAt = events.findIndex((e) => e.type === 'errored');
        if (erroredAt === 0 && resumed && eventsOnStream === 0) {
          failure = this.#bookmarkRefused(events[0]);
          break;
        }
        const ok = erroredAt >= 0 ? events.slice(0, erroredAt) : events;
        eventsOnStream += ok.length;
        for (const e of ok) if (e.bookmark) this.#bookmark = e.bookmark;
        if (ok.length > 0) {
          this.#deliveredSinceStart = true;
          yield ok;
        }
        if (erroredAt >= 0) {
          throw new WatchErroredError(`the watch failed: ${events[erroredAt]?.error ?? 'ERRORED event'}`, {
            method: fullMethod('Watch'),
            resource: this.#kind,
          });
        }
      }
      // Omni never ends a watch by itself: an end is a broken connection (a proxy, a restart).
      failure ??= new TransportError(`${fullMethod('Watch')} ${namespace}/${type}: the watch stream ended`);
    } catch (e) {
      if (hasCode(e, 'OMNI_WATCH_ERRORED')) throw e;
      if (signal?.aborted) return undefined;
      failure = e;
    } finally {
      stream?.close();
    }
    return { failure, eventsOnStream, openedAt };
  }

  /** The Watch request: from the bookmark when there is one, else with the bootstrap's contents and bookmark. */
  #request(): Record<string, unknown> {
    const { namespace, type } = this.#kind;
    const options: Record<string, unknown> = { ...this.#query, aggregated: true };
    if (this.#bookmark) options['start_from_bookmark'] = this.#bookmark;
    else Object.assign(options, { bootstrap_contents: this.opts.bootstrapContents ?? true, bootstrap_bookmark: true });
    return encodeMessage(WatchRequestSchema, { namespace, type, options, api_version: 1 });
  }

  /**
   * Omni's etcd refuses a revision it has compacted away only once the watch is established, with an ERRORED
   * event before anything else (state-etcd's invalid-bookmark error, which is FailedPrecondition when it comes
   * before the watch): the bookmark is refused.
   */
  #bookmarkRefused(e: WatchEvent | undefined): FailedPreconditionError {
    return new FailedPreconditionError(e?.error ?? 'ERRORED event', {
      method: fullMethod('Watch'),
      resource: this.#kind,
    });
  }

  /** After a stream broke: a refused bookmark starts over, a break in transit resumes, anything else is thrown. */
  #afterBreak(failure: unknown): void {
    if (this.#bookmark && hasCode(failure, 'OMNI_FAILED_PRECONDITION')) {
      // The bookmark is too old or from another server process: start over from a fresh bootstrap.
      const { namespace, type } = this.#kind;
      this.host.log.warn(
        { namespace, type, err: failure.message },
        'watch bookmark refused; listing again from scratch',
      );
      this.#bookmark = undefined;
      this.#deliveredSinceStart = false;
      this.opts.onReset?.();
    } else if (brokeInTransit(failure)) {
      if (!this.#bookmark && this.#deliveredSinceStart) {
        // Events were delivered but there is nothing to resume from: the consumer must rebuild.
        this.#deliveredSinceStart = false;
        this.opts.onReset?.();
      }
    } else {
      throw failure;
    }
  }

  /** The backoff before the next stream; false when the caller's signal ended it. */
  async #pause(failure: unknown): Promise<boolean> {
    const ms = jitteredBackoff(this.#failures - 1, this.host.retry.watchBackoff, this.host.random);
    const { namespace, type } = this.#kind;
    this.host.log.info(
      {
        namespace,
        type,
        attempt: this.#failures,
        delayMs: ms,
        resume: this.#bookmark !== undefined,
        err: (failure as Error).message,
      },
      'watch broken; reconnecting',
    );
    try {
      await this.host.delay(ms, this.opts.signal);
      return true;
    } catch {
      return false;
    }
  }
}
