// `--wipe none` (the default): nothing is touched; the disks keep what they hold.

import { Reason, type MachineFacts, type WipeResult, type WipeStrategy } from './types.js';
import { startResult, type Clock } from './result.js';

export class NoneWipe implements WipeStrategy {
  readonly name = 'none';
  constructor(private readonly now?: Clock) {}

  async wipe(m: MachineFacts, _signal: AbortSignal): Promise<WipeResult> {
    return startResult(this.name, m, this.now)('skipped', Reason.noStrategy);
  }
}
