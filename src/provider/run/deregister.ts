// Deregistration as planned (plan/deregistration.ts): the live-provider check (design rule 7), then
// at once what is left of the provider (each its own clean-up), then, once all of it is gone, the
// heartbeat (its beats stopped first, or the next beat would write it again) and the ProviderStatus.

import type { DeregistrationItem } from '../plan/plan.js';
import type { Executor } from './executor.js';
import type { ItemRunner } from './item-run.js';
import { keyOf } from './outcomes.js';
import type { Outcomes } from './outcomes.js';
import type { StubMode } from './stub-mode.js';

/** What a deregistration works with. */
export interface Deregistering {
  /** Runs the clean-ups and the deregistration's own item, each recorded as it ends. */
  items: Pick<ItemRunner, 'released'>;
  /** The executor of this pass. */
  executor: Executor;
  /** Where the deregistration's own outcome goes when it cannot go on. */
  outcomes: Pick<Outcomes, 'record'>;
  /** The live-provider check (design rule 7) and the heartbeat's beats. */
  stubMode: Pick<StubMode, 'checkNoLiveProvider' | 'stopHeartbeat'>;
}

/** Whether the provider is deregistered. */
export async function deregister(d: Deregistering, item: DeregistrationItem): Promise<boolean> {
  await d.stubMode.checkNoLiveProvider();
  const results = await Promise.all(item.cleanup.map((c) => d.items.released(d.executor, c)));
  if (results.some((ok) => !ok)) {
    d.outcomes.record(keyOf(item), {
      kind: 'deregistration',
      id: item.id,
      status: 'blocked',
      reason: "some of the provider's resources could not be destroyed",
      nextStep: 'see the items above and run again',
      counts: true,
    });
    return false;
  }
  await d.stubMode.stopHeartbeat();
  return d.items.released(d.executor, item);
}
