// The audit log (`--audit-log`): every write that may have reached Omni, as two NDJSON lines that
// share `run` and `seq`: an intent, written before the call is sent, and its outcome (ok, failed,
// refused, not-applied, unknown) after. The Audit is the client's write observer
// (omni-client/write/observer.ts), so no call site can forget a write. Lines are written
// synchronously by the sink: a run stopped by a signal loses none, and one killed outright leaves
// at most intents without outcomes, never a write without its intent. Only metadata is recorded,
// never a spec, so no secret can reach the file.
// Every write that Omni applied also makes one log line naming the resource: info by default
// (JSON logs for programs), debug where a person's terminal shows one short line per machine
// instead (one line per write would drown the progress line: docs/operator-guide.md 'The audit log').
// The format is documented in docs/operator-guide.md ("The audit log").

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Pointer, Resource } from '../../omni-api/resource.js';
import { PHASE_RUNNING, PHASE_TEARING_DOWN, describePointer } from '../../omni-api/resource.js';
import type { WriteIntent, WriteObserver, WriteOutcome } from '../../omni-client/write/observer.js';
import { inertJson } from '../../omni-api/untrusted.js';

export type AuditOp = 'create' | 'update' | 'teardown' | 'destroy';
export type AuditResult = 'ok' | 'failed' | 'refused' | 'not-applied' | 'unknown';

/** The write itself: on its intent line, and again on its outcome line. */
interface AuditWrite {
  /** One per process run (several runs may append to one file). */
  run: string;
  /** 1, 2, 3 ... within the run, in the order the writes were sent. */
  seq: number;
  op: AuditOp;
  resource: Pointer;
  owner?: string;
  versionBefore?: string;
  finalizersBefore?: string[];
  phaseBefore?: string;
}

export interface AuditIntent extends AuditWrite {
  time: string;
  event: 'intent';
  /** What the write asks for (Create, Update). */
  finalizersAfter?: string[];
  phaseAfter?: string;
}

export interface AuditOutcome extends AuditWrite {
  time: string;
  event: 'outcome';
  result: AuditResult;
  /** As Omni answered (result ok, Create and Update). */
  versionAfter?: string;
  finalizersAfter?: string[];
  phaseAfter?: string;
  /**
   * failed, refused: Omni's error code; not-applied, unknown: the client's (e.g. OMNI_CANCELED, STUB_TRANSPORT); ok
   * with `evidence`: the answer that was lost or pushed back.
   */
  errorCode?: string;
  error?: string;
  /** ok: how it is known to be applied when the answer did not say so (a Get by its ID, `read-back`). */
  evidence?: 'read-back';
}

export type AuditEntry = AuditIntent | AuditOutcome;

export class Audit {
  /** Writes by op and outcome (`update:ok`, `destroy:unknown`, ...), for the report. */
  readonly counts: Record<string, number> = {};
  readonly run: string;
  /** Where the one log line per write goes. */
  logger: Logger | undefined;
  /** The level of that line for a write Omni applied. */
  readonly writeLogLevel: 'info' | 'debug';
  private seq = 0;
  /** Writes sent and not yet answered, by seq. */
  private readonly pending = new Map<number, AuditWrite>();
  private closed: string | undefined;

  constructor(
    private readonly sink?: (line: string) => void,
    private readonly now: () => number = Date.now,
    logger?: Logger,
    run: string = randomUUID(),
    o: { writeLogLevel?: 'info' | 'debug' } = {},
  ) {
    this.logger = logger;
    this.run = run;
    this.writeLogLevel = o.writeLogLevel ?? 'info';
  }

  /** The client's write observer (OmniClientOptions.onWrite). */
  readonly observer: WriteObserver = (intent) => {
    if (this.closed !== undefined)
      throw new Error(
        `refusing to write ${describePointer(intent.resource)} to Omni: the audit log was closed (${this.closed})`,
      );
    const w = writeOf(intent, this.run, ++this.seq);
    // Written before the write is sent; if it cannot be written, the write is not sent (it throws).
    // Without a file no line is built at all: at 10 000 machines that is 190 000 objects and dates.
    if (this.sink) this.write({ ...this.head(w, 'intent'), ...intended(intent) } satisfies AuditIntent);
    this.pending.set(w.seq, w);
    return (outcome) => this.outcome(w, outcome);
  };

  /**
   * Ends the log: each write still unanswered gets its `unknown` outcome now (`reason`: why the run
   * ends); outcomes that arrive later are not written, and writes after this are refused.
   */
  close(reason: string): void {
    if (this.closed !== undefined) return;
    for (const w of [...this.pending.values()])
      this.outcome(w, { result: 'unknown', error: new Error(`no answer before the run ended (${reason})`) });
    this.closed = reason;
  }

  /** Writes that Omni applied. */
  get writes(): number {
    return Object.entries(this.counts)
      .filter(([k]) => k.endsWith(':ok'))
      .reduce((a, [, v]) => a + v, 0);
  }

  private outcome(w: AuditWrite, o: WriteOutcome): void {
    if (!this.pending.delete(w.seq)) return;
    const k = COUNT_KEYS[w.op][o.result];
    this.counts[k] = (this.counts[k] ?? 0) + 1;
    this.log(w, o);
    if (!this.sink) return;
    const answered =
      o.result === 'ok'
        ? { ...after(o.after), ...(o.evidence ? { evidence: o.evidence, ...failure(o.error) } : {}) }
        : failure(o.error);
    this.write({ ...this.head(w, 'outcome'), result: o.result, ...answered } satisfies AuditOutcome);
  }

  private write(e: AuditEntry): void {
    this.sink!(`${inertJson(JSON.stringify(e))}\n`);
  }

  /** The fields every line starts with, in the order a person reads them. */
  private head<E extends AuditEntry['event']>(w: AuditWrite, event: E): AuditWrite & { time: string; event: E } {
    const { run, seq, ...rest } = w;
    return { time: new Date(this.now()).toISOString(), run, seq, event, ...rest };
  }

  private log(w: AuditWrite, o: WriteOutcome): void {
    const log = this.logger;
    if (!log) return;
    // Most writes are applied, and their line is below the level of a run's JSON logs: nothing built.
    if (o.result === 'ok' && !log.isLevelEnabled(this.writeLogLevel)) return;
    const fields = { op: w.op, resource: describePointer(w.resource) };
    if (o.result === 'ok') {
      const level = this.writeLogLevel;
      const removed =
        w.op === 'update' && w.finalizersBefore && o.after
          ? w.finalizersBefore.filter((f) => !o.after!.metadata.finalizers.includes(f))
          : [];
      log[level](
        {
          ...fields,
          ...(removed.length > 0 ? { finalizersRemoved: removed } : {}),
          ...(o.after ? { version: o.after.metadata.version } : {}),
          ...(o.evidence ? { evidence: o.evidence } : {}),
        },
        MESSAGES[w.op],
      );
    } else if (o.result === 'unknown') {
      log.warn(
        { ...fields, seq: w.seq, err: (o.error as Error)?.message ?? String(o.error) },
        'no answer from Omni to this write: it may have been applied (a run again reads it and carries on)',
      );
    } else {
      // The caller decides what a refusal means (a conflict is retried, NotFound is done); one pushed back and read
      // back as not applied is sent again.
      log.debug(
        { ...fields, result: o.result, err: (o.error as Error)?.message ?? String(o.error) },
        NOT_APPLIED[o.result],
      );
    }
  }
}

const NOT_APPLIED = {
  failed: 'Omni refused a write',
  refused: 'Omni pushed back on a write, and reading it back showed it was not applied',
  'not-applied': 'the answer to a write was lost, and reading it back showed it was not applied',
} as const;

/** The `counts` key of each op and result (`update:ok`, ...), made once: not a string per write. */
const COUNT_KEYS = Object.fromEntries(
  (['create', 'update', 'teardown', 'destroy'] as const).map((op) => [
    op,
    Object.fromEntries((['ok', 'failed', 'refused', 'not-applied', 'unknown'] as const).map((r) => [r, `${op}:${r}`])),
  ]),
) as Record<AuditOp, Record<AuditResult, string>>;

const MESSAGES: Record<AuditOp, string> = {
  create: 'created',
  update: 'updated',
  teardown: 'tore down',
  destroy: 'destroyed',
};

function opOf(i: WriteIntent): AuditOp {
  if (i.method === 'Create') return 'create';
  if (i.method === 'Destroy') return 'destroy';
  // teardown is an Update of the phase, sent on the condition that the resource is still running.
  return i.expectedPhase === PHASE_RUNNING && i.sent?.metadata.phase === PHASE_TEARING_DOWN ? 'teardown' : 'update';
}

function writeOf(i: WriteIntent, run: string, seq: number): AuditWrite {
  const b = i.before?.metadata;
  const version = b?.version ?? (i.method === 'Update' ? i.sent?.metadata.version : undefined);
  return {
    run,
    seq,
    op: opOf(i),
    resource: { namespace: i.resource.namespace, type: i.resource.type, id: i.resource.id },
    owner: i.owner,
    ...(version !== undefined ? { versionBefore: version } : {}),
    // The resource as read is never changed in place (writes send a copy): no copy of its list.
    ...(b ? { finalizersBefore: b.finalizers, phaseBefore: b.phase } : {}),
  };
}

function intended(i: WriteIntent): Pick<AuditIntent, 'finalizersAfter' | 'phaseAfter'> {
  const s = i.sent?.metadata;
  return s ? { finalizersAfter: [...s.finalizers], phaseAfter: s.phase } : {};
}

function after(r: Resource | undefined): Pick<AuditOutcome, 'versionAfter' | 'finalizersAfter' | 'phaseAfter'> {
  return r
    ? { versionAfter: r.metadata.version, finalizersAfter: [...r.metadata.finalizers], phaseAfter: r.metadata.phase }
    : {};
}

function failure(err: unknown): Pick<AuditOutcome, 'errorCode' | 'error'> {
  const e = err as { code?: unknown; message?: unknown };
  return {
    ...(typeof e?.code === 'string' ? { errorCode: e.code } : {}),
    error: typeof e?.message === 'string' ? e.message : String(err),
  };
}
