// slim.ts shares what repeats across a fleet: one frozen label set, annotation set and finalizer list
// per distinct value, one copy of each string. The last value shared of each field is found by
// comparing with it (most of a List's items are alike): whatever the order items come in, a resource
// keeps exactly what it had, and only equal sets are ever shared.
import { describe, expect, it } from 'vitest';
import type { Resource } from '../../../src/omni-api/resource.js';
import { Slimmer } from '../../../src/provider/read/slim.js';

const ID = 'bare-metal';
const NS = `infra-provider:${ID}`;
const TYPE = `MachineStatus.${ID}.infraprovider.sidero.dev`;

/** A resource of our namespace with fresh (unshared) strings, as each decoded answer has them. */
function fresh(
  id: string,
  o: { labels?: Record<string, string>; annotations?: Record<string, string>; finalizers?: string[] } = {},
): Resource {
  const copy = (s: string): string => [...s].join('');
  return {
    metadata: {
      namespace: copy(NS),
      type: copy(TYPE),
      id,
      version: copy('3'),
      owner: copy(''),
      phase: 'running',
      created: copy('2026-12-06T10:00:00Z'),
      updated: copy('2026-12-06T10:00:01Z'),
      finalizers: (o.finalizers ?? [`${ID}.MachineController`]).map(copy),
      labels: Object.fromEntries(Object.entries(o.labels ?? {}).map(([k, v]) => [copy(k), copy(v)])),
      annotations: Object.fromEntries(Object.entries(o.annotations ?? {}).map(([k, v]) => [copy(k), copy(v)])),
    },
    spec: { protoSpec: new Uint8Array([8, 1]) },
  };
}

describe('Slimmer', () => {
  it('keeps what each resource had, whatever the order of alike and different ones', () => {
    const s = new Slimmer(ID);
    const shapes: { labels: Record<string, string>; annotations?: Record<string, string>; finalizers: string[] }[] = [
      { labels: { a: '1', b: '2' }, finalizers: [`${ID}.A`, `${ID}.B`] },
      { labels: { a: '1', b: '2' }, finalizers: [`${ID}.A`, `${ID}.B`] },
      { labels: { a: '1', b: '2' }, finalizers: [`${ID}.A`, `${ID}.C`] },
      { labels: { a: '1', b: '3' }, finalizers: [`${ID}.A`] },
      { labels: { b: '2', a: '1' }, finalizers: [`${ID}.B`, `${ID}.A`] },
      { labels: { a: '1' }, annotations: { a: '1', b: '2' }, finalizers: [`${ID}.A`, `${ID}.B`, `${ID}.C`] },
      { labels: { a: '1', b: '2', c: '' }, annotations: { a: '1' }, finalizers: [`${ID}.A`, `${ID}.B`] },
      { labels: { a: '1', b: '2' }, annotations: { a: '1', b: '2' }, finalizers: [`${ID}.A`, `${ID}.B`] },
      { labels: {}, finalizers: [] },
      { labels: { a: '1', b: '2' }, finalizers: [`${ID}.A`, `${ID}.B`] },
    ];
    for (const order of [shapes, [...shapes].reverse(), [...shapes, ...shapes]]) {
      order.forEach((o, i) => {
        const r = s.slim(fresh(`m${i}`, o), true);
        expect(r.metadata.labels).toEqual(o.labels);
        expect(Object.keys(r.metadata.labels)).toEqual(Object.keys(o.labels));
        expect(r.metadata.annotations).toEqual(o.annotations ?? {});
        expect(r.metadata.finalizers).toEqual(o.finalizers);
        expect(r.metadata.namespace).toBe(NS);
        expect(r.metadata.type).toBe(TYPE);
        expect(r.metadata.created).toBe('2026-12-06T10:00:00Z');
      });
    }
  });

  it('shares one frozen copy of each equal label set, annotation set and finalizer list', () => {
    const s = new Slimmer(ID);
    const o = { labels: { a: '1', b: '2' }, annotations: { n: 'x' }, finalizers: [`${ID}.A`, `${ID}.B`] };
    const first = s.slim(fresh('m1', o), true).metadata;
    // Another value in between: the next alike one is still found.
    const other = s.slim(fresh('m2', { labels: { a: '1', b: '9' }, finalizers: [`${ID}.A`] }), true).metadata;
    const again = s.slim(fresh('m3', o), true).metadata;
    const next = s.slim(fresh('m4', o)).metadata;
    for (const md of [again, next]) {
      expect(md.labels).toBe(first.labels);
      expect(md.annotations).toBe(first.annotations);
      expect(md.finalizers).toBe(first.finalizers);
    }
    expect(other.labels).not.toBe(first.labels);
    expect(other.finalizers).not.toBe(first.finalizers);
    expect(Object.isFrozen(first.labels) && Object.isFrozen(first.finalizers)).toBe(true);
    // Strings shared too: one copy of the namespace, the type, the owner, a List's timestamps.
    expect(s.intern([...NS].join(''))).toBe(first.namespace);
    expect(next.namespace).toBe(first.namespace);
    expect(next.type).toBe(first.type);
    expect(again.created).toBe(first.created);
    // Of another kind, owner and time: its own.
    const elsewhere = fresh('m5', o);
    Object.assign(elsewhere.metadata, {
      namespace: 'infra-provider',
      type: 'InfraMachines.omni.sidero.dev',
      owner: 'InfraMachineController',
      created: '2026-12-06T11:00:00Z',
    });
    const md = s.slim(elsewhere, true).metadata;
    expect([md.namespace, md.type, md.owner, md.created]).toEqual([
      'infra-provider',
      'InfraMachines.omni.sidero.dev',
      'InfraMachineController',
      '2026-12-06T11:00:00Z',
    ]);
  });
});
