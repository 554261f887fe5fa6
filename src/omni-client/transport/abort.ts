// One 'abort' listener per caller's signal, however many calls share it. A run hands the same
// signal (SIGINT/SIGTERM) to every call; a listener per call in flight would put `--concurrency`
// plus the snapshot's parallel reads on it at once, and Node warns from 11 on
// (MaxListenersExceededWarning). Here each call subscribes to a shared entry instead, and the single
// listener is removed as soon as the last call using the signal has ended.

interface Entry {
  subscribers: Set<() => void>;
  fire: () => void;
}

const entries = new WeakMap<AbortSignal, Entry>();

/**
 * Calls `fn` once when `signal` aborts (at once if it already has). Returns the unsubscribe
 * function; call it when the work ends, aborted or not.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) {
    fn();
    return noop;
  }
  let entry = entries.get(signal);
  if (!entry) {
    const subscribers = new Set<() => void>();
    const fire = (): void => {
      entries.delete(signal);
      for (const f of [...subscribers]) f();
      subscribers.clear();
    };
    entry = { subscribers, fire };
    entries.set(signal, entry);
    signal.addEventListener('abort', fire, { once: true });
  }
  const e = entry;
  // A wrapper, so that the same function subscribed twice is two subscriptions.
  const sub = (): void => fn();
  e.subscribers.add(sub);
  return () => {
    if (!e.subscribers.delete(sub) || e.subscribers.size > 0) return;
    if (entries.get(signal) === e) entries.delete(signal);
    signal.removeEventListener('abort', e.fire);
  };
}

function noop(): void {}
