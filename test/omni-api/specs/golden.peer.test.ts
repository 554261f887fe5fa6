// Golden vectors judge the spec codecs (src/omni-client/specs): bytes that other writers made are
// decoded with ours, and what ours encode is read back by those writers' own message types.
//
// - Omni's messages: test/go/specs-golden marshals them with Omni's generated types
//   (github.com/siderolabs/omni/client v1.5.0) and, as a filter, unmarshals our bytes with them.
//   For each vector: (1) our decode of its bytes gives its JSON, and the unknown fields Go kept;
//   (2) what we encode from its JSON, Go reads as the message Go makes of that JSON; (3) decode then
//   encode gives back the very bytes, unknown fields included (Omni compares specs byte for byte when
//   a provider writes a read-only resource), and Go reads them as the same message.
// - Every vector file in shared/golden/ (the bare-metal provider's messages, serialized by the
//   protobuf runtime from the provider's definitions): (1) as above; (2) and (3) give the same
//   fields on the wire as the vector (their order may differ).
//
// Which Omni versions the fields come from: every field of the v1.5.0 messages here is already in
// Omni 1.3.4 (their .proto files are the same in both). Fields added after 1.5.0, which no vector
// holds, are listed in test/omni-api/specs/coverage.peer.test.ts.

import { beforeAll, describe, expect, it } from 'vitest';
import { decodeSpec, encodeSpec } from '../../../src/omni-api/specs/codec.js';
import { SpecError, unknownFieldsOf } from '../../../src/omni-api/specs/schema.js';
import { specFromPlain, specToPlain } from '../../../src/omni-sim/scenario/plain.js';
import { goPeer } from '../../helpers/peers.js';
import {
  allSchemas,
  fromB64,
  goFilter,
  goVectors,
  hex,
  sharedVectorFiles,
  toB64,
  wireFields,
  type AnySchema,
  type FilterReply,
  type FilterRequest,
  type GoldenVector,
} from '../../helpers/specs-golden.js';

const schemas = allSchemas();
const binary = goPeer('specs-golden');
const omni = await goVectors(binary);
const shared = sharedVectorFiles();

/** What our codecs make of one vector; an error is kept for its test to report. */
interface Ours {
  schema: AnySchema;
  /** Our decoding of the vector's bytes, as protojson. */
  decodedJson: Record<string, unknown>;
  unknown: Uint8Array;
  /** encode(decode(bytes)). */
  roundTrip: Uint8Array;
  /** encode(the vector's JSON). */
  fromJson: Uint8Array;
}

function ours(v: GoldenVector): Ours {
  const schema = schemas.get(v.message);
  if (!schema) throw new Error(`no codec for ${v.message} in src/omni-api/specs/messages.ts or bare-metal.ts`);
  const { value } = decodeSpec(schema, fromB64(v.proto_b64));
  return {
    schema,
    decodedJson: specToPlain(schema, value, 'protojson'),
    unknown: Buffer.concat(unknownFieldsOf(value as object).map((u) => u.data)),
    roundTrip: encodeSpec(schema, value),
    fromJson: encodeSpec(schema, specFromPlain(schema, v.json)),
  };
}

function attempt(v: GoldenVector): Ours | Error {
  try {
    return ours(v);
  } catch (e) {
    return e as Error;
  }
}

const title = (v: GoldenVector): string => `${v.message} / ${v.case}`;

function mustHave(o: Ours | Error): Ours {
  if (o instanceof Error) throw o;
  return o;
}

const valid = omni.vectors.filter((v) => v.invalid === undefined);
const invalid = omni.vectors.filter((v) => v.invalid !== undefined);

describe(`golden vectors: ${omni.name}`, () => {
  const mine = valid.map(attempt);
  // Per vector: [Go encodes the JSON, Go decodes ours from the JSON, Go compares our round trip with the vector].
  let first: FilterReply[][] = [];
  // Per vector: Go compares ours from the JSON with its own from the JSON.
  let second: FilterReply[] = [];

  beforeAll(async () => {
    const dummy = { op: 'decode', message: 'specs.InfraProviderSpec', proto_b64: '' } as const;
    const reqs: FilterRequest[] = valid.flatMap((v, i): FilterRequest[] => {
      const o = mine[i]!;
      if (o instanceof Error) return [dummy, dummy, dummy];
      return [
        { op: 'encode', message: v.message, json: v.json },
        { op: 'decode', message: v.message, proto_b64: toB64(o.fromJson) },
        { op: 'equal', message: v.message, a_b64: toB64(o.roundTrip), b_b64: v.proto_b64 },
      ];
    });
    const replies = await goFilter(binary, reqs);
    first = valid.map((_, i) => replies.slice(3 * i, 3 * i + 3));
    second = await goFilter(
      binary,
      valid.map((v, i): FilterRequest => {
        const o = mine[i]!;
        const goFromJson = first[i]![0]!.proto_b64;
        if (o instanceof Error || goFromJson === undefined) return dummy;
        return { op: 'equal', message: v.message, a_b64: toB64(o.fromJson), b_b64: goFromJson };
      }),
    );
  });

  valid.forEach((v, i) => {
    it(title(v), () => {
      const o = mustHave(mine[i]!);
      // (1) decode
      expect(o.decodedJson, 'our decoding of the vector').toStrictEqual(v.json);
      expect(hex(o.unknown), 'unknown fields kept by our decoding').toBe(hex(fromB64(v.unknown_b64 ?? '')));
      // (2) encode from the JSON
      const [goEncoded, goDecodedOurs, goRoundTrip] = first[i]!;
      expect(goEncoded!.error, 'Go encoding the JSON').toBeUndefined();
      expect(goDecodedOurs!.error, 'Go decoding what we encoded from the JSON').toBeUndefined();
      expect(goDecodedOurs!.json, 'Go reading what we encoded from the JSON').toStrictEqual(v.json);
      expect(second[i]!, 'Go comparing what we encoded from the JSON with its own encoding').toStrictEqual({
        equal: true,
      });
      // (3) decode, then encode: the same bytes, or for bytes that no marshaller writes, what Go writes
      expect(hex(o.roundTrip), 'our decode then encode gives back the bytes').toBe(
        hex(fromB64(v.marshalled_b64 ?? v.proto_b64)),
      );
      expect(goRoundTrip, 'Go comparing our decode-then-encode with the vector').toStrictEqual({ equal: true });
    });
  });

  invalid.forEach((v) => {
    it(`${title(v)} (refused)`, () => {
      const schema = schemas.get(v.message);
      expect(schema, `a codec for ${v.message}`).toBeDefined();
      expect(() => decodeSpec(schema!, fromB64(v.proto_b64)), `Go refuses these bytes (${v.invalid})`).toThrow(
        SpecError,
      );
    });
  });
});

for (const file of shared) {
  describe(`golden vectors: ${file.name}`, () => {
    file.vectors.forEach((v) => {
      it(title(v), () => {
        const o = ours(v);
        const want = wireFields(fromB64(v.proto_b64));
        expect(o.decodedJson, 'our decoding of the vector').toStrictEqual(v.json);
        expect(wireFields(o.fromJson), 'what we encode from the JSON').toStrictEqual(want);
        expect(wireFields(o.roundTrip), 'our decode then encode').toStrictEqual(want);
      });
    });
  });
}
