// An item's wipe operation (the executor performs the rest): the machine's BMC facts from the plan's
// BMCConfiguration and BMCConfig, a wipe slot (the wipe's own concurrency, outside the item limiter),
// the run's leave to start it, the claim among overlapping runs (wipe-claim.ts, design rule 8), then
// the wipe (src/wipe). A wipe another run claimed, or one that failed under --require-wipe, blocks
// the item. Apart from the executor: it is the one operation that runs the operator's program or
// talks to a BMC rather than to Omni.

import type { Logger } from 'pino';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import type { CallOptions, State } from '../../omni-api/state.js';
import { BMCConfigSpec } from '../../omni-api/specs/messages.js';
import { BMCConfigurationSpec } from '../../omni-api/specs/bare-metal.js';
import { decodeSpec } from '../../omni-api/specs/codec.js';
import type { MessageSchema } from '../../omni-api/specs/schema.js';
import { machineFactsFromBmc, runWipes, wipeBlocksRelease } from '../../wipe/index.js';
import type { WipeOptions, WipeResult, WipeStrategy } from '../../wipe/index.js';
import type { WipeOp } from '../plan/operations.js';
import type { Reads } from '../read/reads.js';
import { NEXT } from './item-end.js';
import type { OpResult } from './item-end.js';
import type { Limiter } from './limiter.js';
import { claimWipe } from './wipe-claim.js';
import type { ClaimDeps } from './wipe-claim.js';

/** What a wipe step needs of the executor's dependencies. */
export interface WipeStepDeps {
  state: State;
  log: Logger;
  providerId: string;
  /** Wipes at once at most (the wipe's own concurrency). */
  wipeLimiter: Limiter;
  wipe?: { strategy: WipeStrategy; options: WipeOptions };
  reads: Pick<Reads, 'observe'>;
  signal?: AbortSignal;
  /**
   * Runs `fn` while the item waits for Omni or a wipe: it holds no place meanwhile (taken again in `rank`'s turn), and
   * progress counts it.
   */
  outside: <T>(fn: () => Promise<T>, waitingForOmni: boolean, rank?: number) => Promise<T>;
  /** The item's rank (CallOptions.rank): when it first started in the run; its calls go in that turn. */
  rank?: number;
  /** Told each BMC password a wipe is given, before the wipe runs (the CLI's redaction: src/redact.ts). */
  onSecret?: (secret: string) => void;
  /** Right before a wipe starts: throws NotStartedError when the run may start nothing more. */
  beforeWipe?: () => void;
  /** This run's wipe claims (wipe-claim.ts): a wipe at most once among overlapping runs. */
  claim?: Pick<ClaimDeps, 'runId' | 'now' | 'holdMs'>;
}

/** Performs a wipe operation; `run.wipe` is set to its result when it ran. */
export async function wipeStep(
  d: WipeStepDeps,
  options: CallOptions,
  op: WipeOp,
  run: { wipe: WipeResult | undefined },
): Promise<OpResult> {
  const w = d.wipe;
  if (!w) return NEXT;
  const facts = machineFactsFromBmc(
    op.machineId,
    d.providerId,
    decodeOrUndefined(BMCConfigurationSpec, op.bmcConfiguration),
    decodeOrUndefined(BMCConfigSpec, op.bmcConfig),
  );
  if (facts.bmc?.password) d.onSecret?.(facts.bmc.password);
  // Once it has a wipe slot: whether the run may still start one, then the claim (a claim made
  // while queued could run out before its wipe starts), then the wipe.
  const done = await d.outside(
    () =>
      d.wipeLimiter.run(async () => {
        d.beforeWipe?.();
        const taken =
          op.claim && w.strategy.name !== 'none' ? await claim(d, options, op.claim, op.machineId) : undefined;
        if (taken) return { taken };
        const [res] = await runWipes(w.strategy, [facts], {
          concurrency: 1,
          timeoutMs: w.options.timeoutMs,
          logger: d.log,
          ...(d.signal ? { signal: d.signal } : {}),
        });
        return { res };
      }),
    false,
    d.rank,
  );
  if ('taken' in done)
    return {
      end: {
        status: 'blocked',
        reason: `${done.taken}; not wiped by this run`,
        nextStep: 'run again once that run has ended: it finishes where that run stopped',
        counts: true,
      },
    };
  const res = done.res;
  if (!res) return NEXT;
  run.wipe = res;
  if (wipeBlocksRelease(res, w.options)) {
    return {
      end: {
        status: 'blocked',
        reason:
          `wipe ${res.outcome}${res.reason ? `: ${res.reason}` : ''} (--require-wipe keeps the machine's ` +
          `finalizers)`,
        nextStep: 'fix the BMC access or the wipe command and run again, or run without --require-wipe',
        counts: true,
      },
    };
  }
  return NEXT;
}

/** Claims the machine's wipe for this run (wipe-claim.ts); why not, when another run holds it. */
async function claim(
  d: WipeStepDeps,
  options: CallOptions,
  target: Pointer,
  machineId: string,
): Promise<string | undefined> {
  if (!d.claim) return undefined;
  const claimed = await claimWipe(
    {
      ...d.claim,
      state: d.state,
      options,
      observe: (r) => d.reads.observe(r),
    },
    target,
    machineId,
  );
  return claimed.kind === 'taken' ? claimed.reason : undefined;
}

function decodeOrUndefined<V>(schema: MessageSchema<V>, r: Resource | undefined): V | undefined {
  if (!r) return undefined;
  try {
    return decodeSpec(schema, r.spec.protoSpec).value;
  } catch {
    return undefined;
  }
}
