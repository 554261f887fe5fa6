// Every spec message our code decodes or encodes, and every field of it, has golden vectors
// (test/omni-api/specs/golden.peer.test.ts): from Omni's Go module (test/go/specs-golden) or from a vector file in
// shared/golden/. A message or field added to src/omni-api/specs/messages.ts or bare-metal.ts without a vector
// fails here, and so does a vector of a message we have no codec for.

import { describe, expect, it } from 'vitest';
import { OMNI_SPEC_SCHEMAS, PROVIDER_SPEC_SCHEMAS } from '../../../src/omni-api/specs/specs.js';
import type { FieldSchema } from '../../../src/omni-api/specs/schema.js';
import { goPeer } from '../../helpers/peers.js';
import {
  allSchemas,
  goVectors,
  sharedVectorFiles,
  type AnySchema,
  type GoldenVector,
} from '../../helpers/specs-golden.js';

/**
 * Fields that no vector can hold yet: added to Omni after v1.5.0, the newest version of
 * github.com/siderolabs/omni/client that the module proxy serves here (v1.9.x and v1.10.x are
 * refused). Their numbers and types were checked against Omni's .proto files at the tags named.
 * Every other field of the Omni messages is in Omni 1.3.4 already (its infra.proto, omni.proto,
 * siderolink.proto and system.proto messages that we use are the same as in v1.5.0).
 */
const ADDED_AFTER_GO_MODULE: Record<string, string> = {
  'specs.InfraMachineSpec.power_off_request_id': 'Omni v1.8.0 (after 1.3.4); string, field 11',
  'specs.InfraMachineStatusSpec.last_power_off_id': 'Omni v1.8.0 (after 1.3.4); string, field 7',
  'specs.InfraProviderStatusSpec.version': 'Omni v1.10.0 (after 1.3.4); string, field 5',
};

const schemas = allSchemas();
const omni = await goVectors(goPeer('specs-golden'));
const files = [omni, ...sharedVectorFiles()];
const vectors: GoldenVector[] = files.flatMap((f) => f.vectors).filter((v) => v.invalid === undefined);

const key = (s: AnySchema, f: FieldSchema): string => `${s.name}.${f.name}`;

/**
 * Walks each vector's JSON through our schemas: which messages and fields some vector sets, and the longest list seen
 * per field.
 */
function coverage(): { messages: Set<string>; fields: Map<string, number> } {
  const messages = new Set<string>();
  const fields = new Map<string, number>();
  const walk = (s: AnySchema, json: Record<string, unknown>): void => {
    messages.add(s.name);
    for (const [k, v] of Object.entries(json)) {
      const f = s.fields.find((x) => x.name === k);
      if (!f) continue; // test/omni-api/specs/golden.peer.test.ts fails on a key we cannot read
      const list = f.repeated ? (v as unknown[]) : [v];
      fields.set(key(s, f), Math.max(fields.get(key(s, f)) ?? 0, list.length));
      if (f.kind === 'message') for (const x of list) walk(f.message!(), x as Record<string, unknown>);
    }
  };
  for (const v of vectors) {
    const s = schemas.get(v.message);
    if (s) walk(s, v.json);
  }
  return { messages, fields };
}

const { messages, fields } = coverage();

describe('golden vector coverage', () => {
  it('reads vectors from both sources', () => {
    expect(omni.vectors.length).toBeGreaterThan(150);
    expect(files.length).toBeGreaterThanOrEqual(2);
  });

  it('every vector is of a message we have a codec for', () => {
    const unknown = [...new Set(files.flatMap((f) => f.vectors).map((v) => v.message))].filter((m) => !schemas.has(m));
    expect(unknown).toEqual([]);
  });

  it('covers every message of the resource types we decode or encode', () => {
    const used = [...OMNI_SPEC_SCHEMAS.values(), ...PROVIDER_SPEC_SCHEMAS.values()].map((s) => s.name);
    expect(used.filter((m) => !messages.has(m))).toEqual([]);
  });

  it('covers every message in src/omni-api/specs/messages.ts and bare-metal.ts, nested ones included', () => {
    expect([...schemas.keys()].filter((m) => !messages.has(m))).toEqual([]);
  });

  it('covers every field, with two elements or more in each list', () => {
    const missing: string[] = [];
    for (const s of schemas.values()) {
      for (const f of s.fields) {
        const k = key(s, f);
        if (k in ADDED_AFTER_GO_MODULE) continue;
        const longest = fields.get(k) ?? 0;
        if (longest === 0) missing.push(`${k} (field ${f.no}): no vector sets it`);
        else if (f.repeated && longest < 2) missing.push(`${k} (field ${f.no}): no vector has two elements`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('lists as added after the Go module only fields that exist and that no vector sets yet', () => {
    for (const k of Object.keys(ADDED_AFTER_GO_MODULE)) {
      const dot = k.lastIndexOf('.');
      const s = schemas.get(k.slice(0, dot));
      expect(
        s?.fields.some((f) => f.name === k.slice(dot + 1)),
        `${k} is a field of our codecs`,
      ).toBe(true);
      expect(fields.has(k), `${k} now has a vector: take it off ADDED_AFTER_GO_MODULE`).toBe(false);
    }
  });
});
