// Decisions on fresh facts (docs/design.md rule 10): what the report gives as a reason (still there,
// still held) comes from the run's caches, and a kind's watch may have stopped following Omni. Before
// the report, what the run released and what it left held is read again by its ID.

import type { Logger } from 'pino';
import type { Pointer } from '../../omni-api/resource.js';
import type { State } from '../../omni-api/state.js';
import { getIfExists } from '../../omni-client/read.js';
import type { ProviderCache } from '../read/cache.js';

/** At most this many resources are read again (one Get each). */
export const MAX_CONFIRM_GETS = 1_000;

export interface ConfirmDeps {
  state: State;
  reads: Pick<ProviderCache, 'current' | 'observe' | 'observeNotFound'>;
  log: Logger;
  signal?: AbortSignal;
}

/**
 * Reads by ID (at most MAX_CONFIRM_GETS; the client's call limit bounds those in flight) those of `targets`
 * the caches still hold, and tells the caches what each Get answered. Returns whether any turned out gone or
 * changed.
 */
export async function confirmByGet(d: ConfirmDeps, targets: Pointer[]): Promise<boolean> {
  const held = targets.filter((p) => d.reads.current(p) !== undefined).slice(0, MAX_CONFIRM_GETS);
  let changed = 0;
  await Promise.all(
    held.map(async (p) => {
      const before = d.reads.current(p);
      const fresh = await getIfExists(d.state, p, { signal: d.signal });
      if (!fresh) d.reads.observeNotFound(p);
      else d.reads.observe(fresh);
      if (!fresh || fresh.metadata.version !== before?.metadata.version) changed++;
    }),
  );
  if (changed > 0)
    d.log.info({ read: held.length, changed }, 'read again by ID before the report: the caches were behind');
  return changed > 0;
}
