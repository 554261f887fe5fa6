// The one small interface every wipe strategy implements, and the facts a strategy may use.
// Results carry no secret: a strategy reports what happened, never the credentials it used.

/** A machine's BMC, as the bare-metal provider's BMCConfiguration or Omni's BMCConfig holds it. */
export interface BmcFacts {
  /** IPMI address; Redfish is tried on the same host (the bare-metal provider does the same). */
  address?: string;
  /** IPMI port (UDP, 623 when unset). Redfish uses --redfish-port instead. */
  port?: number;
  username?: string;
  password?: string;
  /** The "api" power manager address (the bare-metal provider uses it for QEMU tests only). */
  apiAddress?: string;
}

export interface MachineFacts {
  machineId: string;
  providerId: string;
  bmc?: BmcFacts;
}

export type WipeOutcome = 'succeeded' | 'failed' | 'skipped';

export interface WipeResult {
  machineId: string;
  strategy: string;
  outcome: WipeOutcome;
  /** Why, in words an operator can act on; never a secret. */
  reason?: string;
  durationMs: number;
}

export interface WipeStrategy {
  readonly name: string;
  /**
   * Best effort: resolves with a result for every machine, also on failure. The signal aborts on the
   * per-machine timeout (reason: a DOMException named "TimeoutError") or when the run is interrupted.
   */
  wipe(m: MachineFacts, signal: AbortSignal): Promise<WipeResult>;
}

export const WIPE_STRATEGIES = [
  'none',
  'command',
  'redfish-power-off',
  'redfish-pxe-reboot',
  'ipmi-power-off',
  'ipmi-pxe-reboot',
] as const;
export type WipeStrategyName = (typeof WIPE_STRATEGIES)[number];

export interface WipeOptions {
  strategy: WipeStrategyName;
  /** `<program> [args]`, split without a shell (strategy `command`). */
  command?: string;
  timeoutMs: number;
  /** When set, a machine whose wipe did not succeed is not released (see wipeBlocksRelease). */
  requireWipe: boolean;
  concurrency: number;
  redfishPort?: number;
  redfishScheme?: 'https' | 'http';
  bmcInsecureSkipTlsVerify?: boolean;
  ipmiInterface?: 'lanplus' | 'lan';
  ipmiCipherSuite?: number;
  ipmitoolPath?: string;
  /** ipmitool -N (seconds per attempt) and -R (attempts); ipmitool's defaults when unset. */
  ipmiAttemptTimeoutS?: number;
  ipmiRetries?: number;
}

/** The standard reasons, so reports and tests agree on the words. */
export const Reason = {
  noStrategy: 'no wipe strategy',
  noBmcData: 'no BMC data',
  unreachable: 'hardware unreachable',
  credentialsRefused: 'BMC refused the credentials',
  alreadyOff: 'already off',
  interrupted: 'interrupted',
} as const;
