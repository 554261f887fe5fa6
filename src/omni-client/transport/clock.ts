// The clock the client signs with (docs/design.md, "Clock"). Omni accepts a signature up to 5
// minutes off its own clock. On "invalid signature" the client adopts the time of Omni's Date
// header (carried by the error, `serverDate`) when the clocks differ by more than 4 minutes, but
// only up to 24 hours: beyond that it stops with STUB_CLOCK_SKEW naming both clocks, since one of
// them is badly wrong or the header is not Omni's.

import type { Logger } from 'pino';
import { ClockSkewError, hasCode } from '../errors.js';
import { type UnauthenticatedError } from '../../omni-api/errors.js';
import { fullMethod, type MethodName } from '../../omni-api/wire.js';

/** Skew beyond which we sign with the server's time (Omni accepts 5 minutes). */
const MAX_SKEW_MS = 4 * 60_000;
/**
 * The largest offset adopted from a Date header. Beyond it one of the clocks is badly wrong, or the
 * header is not Omni's (a proxy, an attacker): signing a month ahead would only spread the damage.
 */
export const MAX_ADOPTED_OFFSET_MS = 24 * 3_600_000;

/** Omni's refusal of a signature: the one error after which its clock may be adopted. */
export function isSignatureRefusal(e: unknown): e is UnauthenticatedError {
  return hasCode(e, 'OMNI_UNAUTHENTICATED') && /invalid signature/i.test(e.omniMessage);
}

export class SigningClock {
  /** Milliseconds added to the local clock when signing (0 unless Omni's clock was adopted). */
  offsetMs = 0;

  constructor(
    readonly now: () => number,
    private readonly origin: string,
    private readonly log: Logger,
  ) {}

  /** The signature's timestamp, in seconds. */
  timestampSec(): number {
    return Math.floor((this.now() + this.offsetMs) / 1000);
  }

  /**
   * Adopts the server's clock when it differs by more than MAX_SKEW_MS from what we sign with, and by
   * at most MAX_ADOPTED_OFFSET_MS from the local clock; beyond that, a ClockSkewError naming both.
   * Whether it adopted it (a retry may then succeed).
   */
  adopt(method: MethodName, date: string | undefined): boolean {
    if (!date) return false;
    const serverMs = Date.parse(date);
    if (Number.isNaN(serverMs)) return false;
    const local = this.now();
    if (Math.abs(serverMs - (local + this.offsetMs)) <= MAX_SKEW_MS) return false;
    const offset = serverMs - local;
    if (Math.abs(offset) > MAX_ADOPTED_OFFSET_MS) {
      const hours = (Math.abs(offset) / 3_600_000).toFixed(1);
      throw new ClockSkewError(
        `${fullMethod(method)}: Omni at ${this.origin} refused the signature ("invalid signature"); its Date header ` +
          `says ` +
          (`${new Date(serverMs).toISOString()} and this machine's clock ${new Date(local).toISOString()}, ${hours} ` +
            `h ` +
            `${offset > 0 ? 'behind' : 'ahead of'} it, `) +
          (`more than the ${MAX_ADOPTED_OFFSET_MS / 3_600_000} h the client adopts: fix the clock that is wrong ` +
            `(NTP); if both are right, something between the stub and Omni rewrites the Date header`),
        { method: fullMethod(method) },
      );
    }
    this.offsetMs = offset;
    this.log.warn(
      { method: fullMethod(method), offsetMs: this.offsetMs, serverDate: date },
      "the local clock differs from Omni's by more than 4 minutes; signing with Omni's time from now on (fix the " +
        'clock: NTP)',
    );
    return true;
  }
}
