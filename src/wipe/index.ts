// src/wipe: best-effort wipe strategies behind one interface (docs/design.md, "Layout"; docs/wipe.md).
// None of them erases disks: they power a machine off or send it to PXE, or run the operator's program.

import type { Logger } from 'pino';
import { CommandWipe } from './command.js';
import { IpmiWipe } from './ipmi.js';
import { NoneWipe } from './none.js';
import { RedfishWipe } from './redfish.js';
import type { Clock } from './result.js';
import type { WipeOptions, WipeStrategy } from './types.js';

export type { MachineFacts, WipeResult, WipeStrategy, WipeOptions } from './types.js';
export { runWipes } from './run.js';
export { wipeCliOptions, wipeOptionsFrom, wipeBlocksRelease } from './options.js';
export { machineFactsFromBmc } from './facts.js';
export { IPMITOOL_MISSING } from './ipmi.js';

export interface WipeDeps {
  logger: Logger;
  now?: Clock;
  /** PATH for the programs a strategy starts (the wipe command, ipmitool); the parent's by default. */
  path?: string;
  /** Grace between SIGTERM and SIGKILL for a started program that timed out. */
  killGraceMs?: number;
}

export function createWipeStrategy(opts: WipeOptions, deps: WipeDeps): WipeStrategy {
  switch (opts.strategy) {
    case 'none':
      return new NoneWipe(deps.now);
    case 'command':
      if (!opts.command) throw new TypeError('wipe strategy "command" needs a command');
      return new CommandWipe(opts.command, deps);
    case 'redfish-power-off':
    case 'redfish-pxe-reboot':
      return new RedfishWipe(
        {
          action: opts.strategy === 'redfish-power-off' ? 'power-off' : 'pxe-reboot',
          port: opts.redfishPort ?? 443,
          scheme: opts.redfishScheme ?? 'https',
          insecureSkipTlsVerify: opts.bmcInsecureSkipTlsVerify ?? false,
        },
        deps,
      );
    case 'ipmi-power-off':
    case 'ipmi-pxe-reboot':
      return new IpmiWipe(
        {
          action: opts.strategy === 'ipmi-power-off' ? 'power-off' : 'pxe-reboot',
          interface: opts.ipmiInterface ?? 'lanplus',
          cipherSuite: opts.ipmiCipherSuite ?? 3,
          ...(opts.ipmitoolPath ? { ipmitoolPath: opts.ipmitoolPath } : {}),
          ...(opts.ipmiAttemptTimeoutS !== undefined ? { attemptTimeoutS: opts.ipmiAttemptTimeoutS } : {}),
          ...(opts.ipmiRetries !== undefined ? { retries: opts.ipmiRetries } : {}),
        },
        deps,
      );
  }
}
