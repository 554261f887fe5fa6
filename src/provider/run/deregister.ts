// Deregistration as planned (plan/deregistration.ts): the live-provider check (design rule 7), then
// at once what is left of the provider (each its own clean-up), then, once all of it is gone, the
// heartbeat (its beats stopped first, or the next beat would write it again) and the ProviderStatus.

import type { ItemOutcome } from './outcomes.js';
import type { DeregistrationItem, PlanItem } from '../plan/plan.js';

export interface DeregisterDeps {
  /** Runs an item and records its outcome; whether it was released. */
  runItem: (item: PlanItem) => Promise<boolean>;
  /** Records the deregistration's own outcome when it cannot go on. */
  record: (outcome: ItemOutcome) => void;
  checkNoLiveProvider: () => Promise<void>;
  stopHeartbeat: () => Promise<void>;
}

/** Whether the provider is deregistered. */
export async function deregister(d: DeregisterDeps, item: DeregistrationItem): Promise<boolean> {
  await d.checkNoLiveProvider();
  const results = await Promise.all(item.cleanup.map((c) => d.runItem(c)));
  if (results.some((ok) => !ok)) {
    d.record({
      kind: 'deregistration',
      id: item.id,
      status: 'blocked',
      reason: "some of the provider's resources could not be destroyed",
      nextStep: 'see the items above and run again',
      counts: true,
    });
    return false;
  }
  await d.stopHeartbeat();
  return d.runItem(item);
}
