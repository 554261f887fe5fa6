// The audit log (docs/operator-guide.md, "The audit log") holds every write that may have reached
// Omni, as an intent line before it is sent and an outcome line after, paired by (run, seq).

import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { Writable } from 'node:stream';
import { CanceledError, FailedPreconditionError } from '../../../src/omni-api/errors.js';
import { NS_INFRA_PROVIDER, T, newMetadata } from '../../../src/omni-api/resource.js';
import type { Resource } from '../../../src/omni-api/resource.js';
import { Audit } from '../../../src/provider/report/audit.js';
import type { AuditEntry } from '../../../src/provider/report/audit.js';

const P = { namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: 'm-1' };
const before: Resource = {
  metadata: newMetadata(P, {
    version: '5',
    phase: 'tearingDown',
    owner: 'InfraMachineController',
    finalizers: ['bm.A', 'Other'],
  }),
  spec: { protoSpec: new Uint8Array([1]) },
};
const sent: Resource = { metadata: { ...before.metadata, finalizers: ['Other'] }, spec: before.spec };
const answered: Resource = { metadata: { ...sent.metadata, version: '6' }, spec: before.spec };

function audit(o: { writeLogLevel?: 'info' | 'debug'; level?: string } = {}) {
  const lines: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const logger = pino(
    { level: o.level ?? 'debug' },
    new Writable({
      write(c: Buffer, _e, cb) {
        logs.push(JSON.parse(c.toString()) as Record<string, unknown>);
        cb();
      },
    }),
  );
  let t = Date.parse('2026-01-02T03:04:05.000Z');
  const a = new Audit(
    (l) => lines.push(l),
    () => (t += 1000),
    logger,
    'run-1',
    o.writeLogLevel ? { writeLogLevel: o.writeLogLevel } : {},
  );
  return { a, lines, logs, entries: () => lines.map((l) => JSON.parse(l) as AuditEntry) };
}

describe('Audit', () => {
  it('writes the intent before the write and the outcome after, paired by run and seq, with existing fields', () => {
    const { a, lines, entries, logs } = audit();
    const done = a.observer({ method: 'Update', resource: P, owner: 'InfraMachineController', sent, before });
    expect(lines).toHaveLength(1);
    done({ result: 'ok', after: answered });
    expect(entries()).toEqual([
      {
        time: '2026-01-02T03:04:06.000Z',
        run: 'run-1',
        seq: 1,
        event: 'intent',
        op: 'update',
        resource: P,
        owner: 'InfraMachineController',
        versionBefore: '5',
        finalizersBefore: ['bm.A', 'Other'],
        phaseBefore: 'tearingDown',
        finalizersAfter: ['Other'],
        phaseAfter: 'tearingDown',
      },
      {
        time: '2026-01-02T03:04:07.000Z',
        run: 'run-1',
        seq: 1,
        event: 'outcome',
        op: 'update',
        resource: P,
        owner: 'InfraMachineController',
        versionBefore: '5',
        finalizersBefore: ['bm.A', 'Other'],
        phaseBefore: 'tearingDown',
        result: 'ok',
        versionAfter: '6',
        finalizersAfter: ['Other'],
        phaseAfter: 'tearingDown',
      },
    ]);
    expect(a.counts).toEqual({ 'update:ok': 1 });
    expect(logs).toEqual([
      expect.objectContaining({ level: 30, msg: 'updated', op: 'update', finalizersRemoved: ['bm.A'], version: '6' }),
    ]);
    expect(lines.join('')).not.toMatch(/protoSpec|proto_spec/);
  });

  it("failed names Omni's code and message; unknown the client's; a teardown is named so", () => {
    const { a, entries, logs } = audit();
    a.observer({ method: 'Destroy', resource: P, owner: 'x', before })({
      result: 'failed',
      error: new FailedPreconditionError('resource has pending finalizers', { httpStatus: 400 }),
    });
    a.observer({
      method: 'Update',
      resource: P,
      owner: 'o',
      sent: { ...sent, metadata: { ...sent.metadata, phase: 'tearingDown' } },
      before: { ...before, metadata: { ...before.metadata, phase: 'running' } },
      expectedPhase: 'running',
    })({ result: 'unknown', error: new CanceledError('cancelled by the caller') });
    const out = entries().filter((e) => e.event === 'outcome');
    expect(out.map((e) => [e.seq, e.op, 'result' in e ? e.result : '', 'errorCode' in e ? e.errorCode : ''])).toEqual([
      [1, 'destroy', 'failed', 'OMNI_FAILED_PRECONDITION'],
      [2, 'teardown', 'unknown', 'OMNI_CANCELED'],
    ]);
    expect(out[0]).toMatchObject({ error: expect.stringContaining('pending finalizers') });
    expect(a.counts).toEqual({ 'destroy:failed': 1, 'teardown:unknown': 1 });
    expect(a.writes).toBe(0);
    expect(logs.map((l) => [l['level'], l['op']])).toEqual([
      [20, 'destroy'],
      [40, 'teardown'],
    ]);
  });

  it('close gives each unanswered write its unknown outcome, ignores a late answer and refuses new writes', () => {
    const { a, entries } = audit();
    const late = a.observer({ method: 'Destroy', resource: P, owner: '' });
    a.observer({ method: 'Destroy', resource: { ...P, id: 'm-2' }, owner: '' })({ result: 'ok' });
    a.close('interrupted (SIGTERM)');
    late({ result: 'ok' });
    expect(() => a.observer({ method: 'Destroy', resource: P, owner: '' })).toThrow(/audit log was closed/);
    const es = entries();
    expect(es.map((e) => `${e.seq} ${e.event}${'result' in e ? ` ${e.result}` : ''}`)).toEqual([
      '1 intent',
      '2 intent',
      '2 outcome ok',
      '1 outcome unknown',
    ]);
    expect(es.at(-1)).toMatchObject({ error: 'no answer before the run ended (interrupted (SIGTERM))' });
  });

  it('every line is one line of JSON, with what a terminal acts on written as \\uXXXX', () => {
    const { a, lines } = audit();
    const hostile = { ...P, id: 'x\u009b2J\u202e\nforged' };
    a.observer({ method: 'Destroy', resource: hostile, owner: '' })({
      result: 'unknown',
      error: new Error('cut\r\noff'),
    });
    expect(lines.every((l) => l.endsWith('\n') && !l.slice(0, -1).includes('\n'))).toBe(true);
    expect(lines.join('')).not.toMatch(/[\u009b\u202e\r]/);
    expect((JSON.parse(lines[0]!) as AuditEntry).resource.id).toBe(hostile.id);
  });

  it('writeLogLevel debug (a terminal): the line per applied write is debug, hidden at info; audit lines same', () => {
    const shown = audit({ writeLogLevel: 'debug', level: 'info' });
    shown.a.observer({ method: 'Update', resource: P, owner: 'InfraMachineController', sent, before })({
      result: 'ok',
      after: answered,
    });
    shown.a.observer({ method: 'Destroy', resource: P, owner: 'x', before })({
      result: 'unknown',
      error: new CanceledError('cancelled by the caller'),
    });
    // A write that may have been applied stays a warning wherever it is shown.
    expect(shown.logs.map((l) => [l['level'], l['op']])).toEqual([[40, 'destroy']]);
    const debug = audit({ writeLogLevel: 'debug' });
    debug.a.observer({ method: 'Update', resource: P, owner: 'InfraMachineController', sent, before })({
      result: 'ok',
      after: answered,
    });
    expect(debug.logs).toEqual([expect.objectContaining({ level: 20, msg: 'updated', finalizersRemoved: ['bm.A'] })]);
    expect(debug.entries().map((e) => e.event)).toEqual(['intent', 'outcome']);
  });

  it('a sink that fails on the intent stops the write (the observer throws) and leaves nothing pending', () => {
    const a = new Audit(() => {
      throw new Error('ENOSPC');
    });
    expect(() => a.observer({ method: 'Destroy', resource: P, owner: '' })).toThrow('ENOSPC');
    expect(() => a.close('the run ended')).not.toThrow();
  });
});
