import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage } from '../../src/omni-api/protojson.js';
import { WireError } from '../../src/omni-api/wire.js';
import {
  EventSchema,
  type MessageSchema,
  MetadataSchema,
  SpecSchema,
  WatchResponseSchema,
  resourceFromWire,
  resourceToWire,
  UpdateRequestSchema,
  WatchRequestSchema,
  ResourceSchema,
} from '../../src/omni-api/wire.js';
import { newMetadata } from '../../src/omni-api/resource.js';

describe('wire JSON codec', () => {
  it('omits zero values but keeps set optional fields, even when empty', () => {
    const out = encodeMessage(UpdateRequestSchema, {
      new_resource: { metadata: { id: 'a', version: '3', phase: 'running', finalizers: [], labels: {} }, spec: {} },
      options: { owner: '', expected_phase: '' },
    });
    expect(out).toEqual({
      new_resource: { metadata: { id: 'a', version: '3', phase: 'running' }, spec: {} },
      options: { expected_phase: '' },
    });
  });

  it('accepts lowerCamel names and enum names, rejects unknown fields when strict', () => {
    const d = decodeMessage(
      WatchRequestSchema,
      {
        namespace: 'n',
        type: 't',
        options: { bootstrapContents: true, label_query: [{ terms: [{ key: 'k', op: 'EQUAL', value: ['v'] }] }] },
        apiVersion: 1,
      },
      { strict: true },
    );
    expect(d['api_version']).toBe(1);
    expect(d['id']).toBeUndefined();
    const opts = d['options'] as Record<string, unknown>;
    expect(opts['bootstrap_contents']).toBe(true);
    expect((opts['label_query'] as { terms: { op: number }[] }[])[0]!.terms[0]!.op).toBe(1);
    expect(() => decodeMessage(WatchRequestSchema, { x: 1 }, { strict: true })).toThrow(WireError);
    expect(decodeMessage(WatchRequestSchema, { x: 1 }, { strict: false })['namespace']).toBe('');
  });

  it('skips reserved names and refuses a field given twice under both spellings', () => {
    expect(() => decodeMessage(UpdateRequestSchema, { current_version: 'x' }, { strict: true })).not.toThrow();
    expect(() => decodeMessage(UpdateRequestSchema, { new_resource: {}, newResource: {} }, { strict: true })).toThrow(
      /duplicate/,
    );
  });

  it('round-trips a resource through the wire form, bytes as base64', () => {
    const r = {
      metadata: newMetadata(
        { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' },
        {
          version: '7',
          owner: 'InfraMachineController',
          phase: 'tearingDown',
          finalizers: ['bare-metal.WipeStatusController'],
          labels: { 'omni.sidero.dev/infra-provider-id': 'bare-metal' },
          created: '2026-03-01T10:00:00Z',
        },
      ),
      spec: { protoSpec: new Uint8Array([8, 2, 16, 1]) },
    };
    const json = JSON.parse(JSON.stringify(encodeMessage(ResourceSchema, resourceToWire(r))));
    expect(json.spec.proto_spec).toBe('CAIQAQ==');
    const back = resourceFromWire(decodeMessage(ResourceSchema, json, { strict: true }), true);
    expect(back).toEqual(r);
  });

  it('names the exact field of a bad value, nested and repeated, in both directions', () => {
    const bad = { new_resource: { metadata: { id: 'a', finalizers: ['x', 7] }, spec: {} } };
    expect(() => decodeMessage(UpdateRequestSchema, bad, { strict: true })).toThrow(
      'UpdateRequest.new_resource.metadata.finalizers[1]: invalid value for string field',
    );
    expect(() => encodeMessage(UpdateRequestSchema, bad)).toThrow(
      'UpdateRequest.new_resource.metadata.finalizers[1]: expected a string',
    );
    expect(() =>
      decodeMessage(UpdateRequestSchema, { newResource: { metadata: { labels: { k: 1 } } } }, { strict: false }),
    ).toThrow('UpdateRequest.new_resource.metadata.labels.k: invalid value for string field');
    expect(() =>
      decodeMessage(WatchRequestSchema, { options: { labelQuery: [{}, { terms: 'no' }] } }, { strict: true }),
    ).toThrow('WatchRequest.options.label_query[1].terms: invalid value for repeated field');
  });

  it('decodes bytes in either base64 alphabet into bytes of their own', () => {
    const d = decodeMessage(ResourceSchema, { spec: { protoSpec: '-_8=' } }, { strict: true });
    const spec = (d['spec'] as Record<string, unknown>)['proto_spec'] as Uint8Array;
    expect([...spec]).toEqual([0xfb, 0xff]);
    expect(spec.byteOffset).toBe(0);
    expect(spec.buffer.byteLength).toBe(2);
    expect(() => decodeMessage(ResourceSchema, { spec: { proto_spec: 'a b' } }, { strict: true })).toThrow(
      'Resource.spec.proto_spec: invalid value for bytes field',
    );
  });

  it('validates metadata the way Omni does', () => {
    expect(() => resourceFromWire({ metadata: { version: '', phase: 'running' }, spec: {} }, true)).toThrow(/version/);
    expect(() => resourceFromWire({ metadata: { version: '1', phase: 'deleting' }, spec: {} }, true)).toThrow(/phase/);
    expect(() => resourceFromWire({ metadata: { version: '1', phase: 'running' } }, true)).toThrow(/spec is missing/);
  });

  it('accepts exactly the times Date.parse reads, of those shaped as RFC 3339', () => {
    // The shape checked first; then every field at and beyond its bounds, as Date.parse would read them.
    const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
    const zones = ['Z', '+00:00', '-23:59', '+24:00', '-00:60', '+99:99'];
    const differ: string[] = [];
    let accepted = 0;
    for (const month of [0, 1, 2, 12, 13, 99])
      for (let day = 0; day <= 32; day++)
        for (const hour of [0, 23, 24, 25])
          for (const minute of [0, 59, 60])
            for (const second of [0, 59, 60])
              for (const frac of ['', '.5', '.000000000'])
                for (const zone of zones) {
                  const v = `2024-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:${pad(second)}${frac}${zone}`;
                  let ok = true;
                  try {
                    decodeMessage(MetadataSchema, { created: v }, { strict: true });
                  } catch {
                    ok = false;
                  }
                  if (ok) accepted++;
                  if (ok !== !Number.isNaN(Date.parse(v))) differ.push(v);
                }
    expect(differ).toEqual([]);
    expect(accepted).toBeGreaterThan(5_000);
    for (const bad of ['2024-01-01 00:00:00Z', '2024-01-01T00:00:00', '2024-1-01T00:00:00Z', '2024-01-01T00:00:00.Z'])
      expect(() => decodeMessage(MetadataSchema, { updated: bad }, { strict: false })).toThrow(
        'Metadata.updated: invalid google.protobuf.Timestamp value',
      );
  });

  it('decodes the messages of a fixed shape exactly as the generic loop does: values, zeros, nulls, errors', () => {
    const full = {
      namespace: 'ns',
      type: 't',
      id: 'a',
      version: '3',
      owner: 'o',
      phase: 'running',
      created: '2026-03-01T10:00:00Z',
      updated: '2026-12-02T14:28:03.514Z',
      finalizers: ['f1', 'f2'],
      labels: { k: 'v' },
      annotations: { a: 'b' },
    };
    const spec = { proto_spec: 'CgVoZWxsbw==', yaml_spec: 'a: 1' };
    const resource = { metadata: full, spec };
    const event = { resource, event_type: 1, old: resource, error: 'e', bookmark: 'AAAAAAAAAbo=' };
    const samples: [MessageSchema, Record<string, unknown>][] = [
      [MetadataSchema, full],
      [SpecSchema, spec],
      [ResourceSchema, resource],
      [EventSchema, event],
      [WatchResponseSchema, { event: [event, event] }],
    ];
    const bad = [7, [1], { x: 1 }, 'x', true, ['ok', 2], { k: 1 }];
    for (const [schema, sample] of samples) {
      // A copy of the schema is another object: decodeMessage reads it with its generic loop.
      const generic = { ...schema, fields: [...schema.fields] };
      const keys = Object.keys(sample);
      const cases: unknown[] = [
        sample,
        {},
        { ...sample, extra: 1 },
        { extra: 1, ...sample },
        Object.fromEntries(keys.map((k) => [k, null])),
        Object.fromEntries(keys.map((k) => [camelCase(k), sample[k]])),
        { ...sample, ...Object.fromEntries(keys.map((k) => [camelCase(k), sample[k]])) },
        ...keys.flatMap((k) => bad.map((v) => ({ ...sample, [k]: v }))),
        ...keys.flatMap((k) => bad.map((v) => ({ [k]: v, ...Object.fromEntries(keys.map((x) => [x, 7])) }))),
        { ...sample, created: '2026-02-30T00:00:00Z', updated: '2026-13-01T00:00:00Z' },
        [],
        'message',
        null,
      ];
      const outcome = (s: MessageSchema, json: unknown, strict: boolean): unknown => {
        try {
          return { value: decodeMessage(s, json, { strict }, 'at') };
        } catch (e) {
          return { error: (e as Error).message };
        }
      };
      for (const json of cases)
        for (const strict of [false, true]) {
          const got = outcome(schema, json, strict);
          expect([schema.name, json, strict, got]).toStrictEqual([
            schema.name,
            json,
            strict,
            outcome(generic, json, strict),
          ]);
          if ('value' in (got as object))
            expect(Object.keys((got as { value: object }).value)).toEqual(schema.fields.map((f) => f.name));
        }
    }
  });
});

function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
