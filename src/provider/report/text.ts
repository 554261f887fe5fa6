// The report as a person reads it (report.ts has its model): the header, what was (or would be)
// done, what is left and why, the deregistration and what to do next. Apart from the model: the
// JSON and `--report` carry the model as it is; only this file decides words, order and layout
// (wrapped at a terminal's width by wrap.ts).

import { escapeControlIn } from '../../omni-api/untrusted.js';
import { describeDuration } from '../plan/explain.js';
import type { Report, ReportEntry, Throttling } from './report.js';
import { wrapText } from './wrap.js';

const LIST_LIMIT = 20;

/**
 * The human summary. Every string of the report is escaped first (design rule 13): IDs, finalizers,
 * reasons and Omni's messages come from the server, and a control character in one of them could
 * clear the screen or forge a line of this summary. `width`: the terminal's columns, to wrap at
 * (between words); absent off a terminal, where nothing is wrapped. `wrap: false`: laid out for that
 * width (the step chains) but left for the caller to wrap (after redaction, run-io.ts terminalText).
 */
export function renderText(report: Report, o: { width?: number; wrap?: boolean } = {}): string {
  const rep = escapeControlIn(report);
  const out: string[] = [];
  const head = rep.command === 'plan' ? 'Plan (nothing was changed)' : `Result: ${rep.result}`;
  out.push(
    `stub-provider ${rep.version} — provider ${rep.providerId} ` +
      `(${rep.mode === 'whole' ? 'whole provider' : `machines: ${rep.machines.join(', ')}`}), ` +
      `${rep.omniVersion ? `Omni ${rep.omniVersion}` : 'Omni version unknown (SysVersion not readable)'}`,
  );
  out.push(`${head}; profile ${rep.profile.reason}`);
  if (rep.planned) plannedText(out, rep, rep.planned, o.width);
  doneText(out, rep);
  leftText(out, rep);
  deregistrationText(out, rep.deregistration);
  if (rep.timedOut) out.push('', 'Timed out before everything was released (--timeout).');
  if (rep.interrupted) out.push('', 'Interrupted: calls in flight were cancelled; run again to finish.');
  if (rep.durationMs !== undefined) out.push('', `Took ${describeDuration(rep.durationMs)}.`);
  out.push(...whatNext(rep));
  // On a terminal, wrapped at its width between words; elsewhere one item per line (o.width absent).
  const text = `${out.join('\n')}\n`;
  return o.width && o.wrap !== false ? wrapText(text, o.width) : text;
}

/** "throttled: 12 signals, waited 3.4 s" (the text summary and the progress line). */
export function describeThrottling(t: Pick<Throttling, 'signals' | 'waitedMs'>): string {
  return `throttled: ${t.signals} signal${t.signals === 1 ? '' : 's'}, waited ${(t.waitedMs / 1000).toFixed(1)} s`;
}

/** A titled list of entries, at most LIST_LIMIT of them; nothing when it is empty. */
function section(out: string[], title: string, xs: ReportEntry[], fmt: (x: ReportEntry) => string): void {
  if (xs.length === 0) return;
  out.push('', `${title} (${xs.length}):`);
  for (const x of xs.slice(0, LIST_LIMIT)) out.push(`  - ${fmt(x)}`);
  if (xs.length > LIST_LIMIT) out.push(`  … and ${xs.length - LIST_LIMIT} more (see --output json or --report)`);
}

const withNext = (x: ReportEntry) =>
  `${x.kind} ${x.id}: ${x.reason ?? ''}${x.nextStep ? `\n      next: ${x.nextStep}` : ''}`;

/** A plan's: what a run would write now, each item's steps, and what Omni's own finalizers will do. */
function plannedText(out: string[], rep: Report, planned: NonNullable<Report['planned']>, width?: number): void {
  out.push(
    '',
    `Would write ${planned.writes} change(s) ` +
      `now${planned.announce ? ', announce stub mode and send heartbeats' : ''}.`,
  );
  section(
    out,
    'Would release or clean',
    planned.items.map((i) => ({ kind: i.kind, id: i.id, reason: chain(i, width) })),
    (x) => `${x.kind} ${x.id}: ${x.reason}`,
  );
  section(out, 'Will wait for Omni', rep.waits, withNext);
  section(out, 'Omni lets go by itself', rep.lettingGo, withNext);
  section(out, "Cannot be seen with the provider's account (Omni decides)", rep.unseen, withNext);
}

/** A run's: what it released, cleaned up and refused, what the settle saw, how much Omni throttled it. */
function doneText(out: string[], rep: Report): void {
  section(out, 'Released', rep.released, (x) => `${x.kind} ${x.id}`);
  if (rep.cleaned > 0)
    out.push('', `Cleaned up ${rep.cleaned} leftover resource(s) whose machine or request was already gone.`);
  section(out, 'Refused', rep.refused, (x) => `${x.kind} ${x.id}: ${x.reason}`);
  const st = rep.settle;
  if (st && st.items > 0)
    out.push(
      '',
      st.ms > 0
        ? `Watched for up to ${describeDuration(st.ms)} after the last write (--settle) the ${st.items} item(s) ` +
            `others still held: ${st.gone} gone, ${st.held} still held.`
        : `Not watched after the last write (--settle 0): ${st.items} item(s) others still held are reported as last ` +
            `read.`,
    );
  const th = rep.throttling;
  if (th) {
    out.push(
      '',
      `Omni ${describeThrottling(th)} (writes in flight down to ${th.minWritesInFlight} of ${th.maxWritesInFlight}); ` +
        (`${th.retriedWrites} write(s) sent again after a re-read, ${th.foundApplied} found applied on re-read and ` +
          `not sent again`) +
        `${th.lostAnswers ? `, ${th.lostAnswers} answer(s) lost` : ''}${
          th.gaveUp ? `; ${th.gaveUp} write(s) given ` + `up (STUB_THROTTLED)` : ''
        }.`,
    );
  }
}

/** What is left, and why: blocked, failed, not done in time, interrupted, untouched, left behind, not found. */
function leftText(out: string[], rep: Report): void {
  section(out, 'Blocked', rep.blocked, withNext);
  section(out, 'Failed', rep.failed, withNext);
  section(out, 'Not done before --timeout', rep.remaining, withNext);
  section(
    out,
    'Interrupted (under way when the signal came; run again)',
    rep.interruptedItems,
    (x) => `${x.kind} ${x.id}`,
  );
  section(out, 'Not started (the signal came first; run again)', rep.notStarted, (x) => `${x.kind} ${x.id}`);
  section(out, 'Still running (untouched)', rep.running, withNext);
  section(out, 'Left behind', rep.leftBehind, withNext);
  if (rep.notFound.length) out.push('', `Not found (nothing to do): ${rep.notFound.join(', ')}`);
}

/** The deregistration, its reasons (five at most), and the last step once it may be taken. */
function deregistrationText(out: string[], d: Report['deregistration']): void {
  const more = d.reasons.length > 5 ? `; … ${d.reasons.length - 5} more` : '';
  const reasons = d.reasons.length ? ` — ${d.reasons.slice(0, 5).join('; ')}${more}` : '';
  out.push('', `Deregistration: ${d.status}${reasons}`);
  if (d.lastStep) out.push(`Last step, for an admin: ${d.lastStep}`);
  else if (d.lastStepAfterRun)
    out.push(`Last step, for an admin, once a run has deregistered the provider (not before): ${d.lastStepAfterRun}`);
  if (d.warning && (d.lastStep || d.lastStepAfterRun)) out.push(`Warning: ${d.warning}`);
}

/**
 * What to do after a run that did not end with the last step (deregistrationOf says when it does):
 * the next command, and why the registration must stay until a run has deregistered the provider.
 */
function whatNext(rep: Report): string[] {
  if (rep.command !== 'run' || rep.deregistration.lastStep) return [];
  const out: string[] = [];
  const st = rep.deregistration.status;
  if (rep.result === 'declined')
    out.push('', 'Next: nothing was changed; run again and answer y, or see `stub-provider plan`.');
  else if (rep.result === 'incomplete')
    out.push(
      '',
      'Next: not everything was released (the reasons are above); run again: it carries on where this run stopped.',
    );
  else if (rep.result !== 'interrupted' && (st === 'ready' || st === 'after-releases'))
    out.push('', 'Next: run again to deregister (Omni had not yet destroyed what this run released).');
  if (rep.mode === 'whole' && st !== 'disabled' && st !== 'done') {
    out.push(
      `Keep the registration until a run reports "Deregistration: deregistered": \`omnictl infraprovider delete ` +
        `${rep.providerId}\` deletes the provider's service account and keys, so the stub could not log in again ` +
        'to finish (and before Omni 1.4 nothing else releases its machines).',
    );
  }
  return out;
}

const CHAIN_INDENT = '      ';

/**
 * A planned item's reason and its steps in order; a step on a resource of the item's own ID names
 * only the type. On a terminal (`width`), a chain that does not fit on the item's row goes below it,
 * indented, broken between steps; elsewhere it stays on the item's line.
 */
function chain(i: NonNullable<Report['planned']>['items'][number], width: number | undefined): string {
  const steps = i.steps.map((s) => {
    const name = s.resource ? shortName(s.resource, i.id) : '';
    const detail =
      s.op === 'wait' ? ` (for ${s.finalizers?.join(', ') ?? ''})` : s.op === 'get' ? ` (${s.answered ?? ''})` : '';
    return `${s.op}${name ? ` ${name}` : ''}${detail}`;
  });
  const one = `${i.reason}: ${steps.join(' → ')}`;
  if (width === undefined || `  - ${i.kind} ${i.id}: ${one}`.length <= width) return one;
  const lines: string[] = [];
  for (const [n, st] of steps.entries()) {
    const piece = n === 0 ? st : `→ ${st}`;
    const last = lines.at(-1);
    if (last !== undefined && CHAIN_INDENT.length + last.length + 1 + piece.length <= width)
      lines[lines.length - 1] = `${last} ${piece}`;
    else lines.push(piece);
  }
  return `${i.reason}:${lines.map((l) => `\n${CHAIN_INDENT}${l}`).join('')}`;
}

/**
 * `namespace/Type.group/id` -> `Type/id` (`Type` when the ID is the item's own), for the terminal;
 * a wipe's resource is a machine ID (none shown when it is the item's own).
 */
function shortName(resource: string, itemId: string): string {
  if (!resource.includes('/')) return resource === itemId ? '' : resource;
  const [, type = '', ...rest] = resource.split('/');
  const id = rest.join('/');
  const short = type.split('.')[0] ?? type;
  return id === itemId ? short : `${short}/${id}`;
}
