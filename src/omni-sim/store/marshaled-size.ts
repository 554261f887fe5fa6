// What a resource costs in Omni's etcd state: the protobuf of COSI's Resource as that state stores it
// (without yaml_spec), compressed from 2 KiB and encrypted. The store charges it to the write gate
// (Omni's write budget, gateway/throttle.ts) for every write to an etcd-backed kind. Apart from the
// throttle because it is a fact of the storage, which the store owns, not of the budget that spends it.

import { deflateRawSync } from 'node:zlib';
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import type { Resource } from '../../omni-api/resource.js';

/**
 * The size Omni charges for a resource: the protobuf of COSI's Resource without yaml_spec, as its etcd state stores it.
 */
export function marshaledSize(r: Resource): number {
  const md = r.metadata;
  const w = new BinaryWriter();
  w.tag(1, 2).fork();
  const str = (field: number, v: string) => {
    if (v !== '') w.tag(field, 2).string(v);
  };
  str(1, md.namespace);
  str(2, md.type);
  str(3, md.id);
  str(4, md.version);
  str(5, md.owner);
  str(6, md.phase);
  for (const [field, at] of [
    [7, md.created],
    [8, md.updated],
  ] as const) {
    if (at === undefined) continue;
    const ms = Date.parse(at);
    const seconds = Math.floor(ms / 1000);
    const nanos = (ms - seconds * 1000) * 1e6;
    w.tag(field, 2).fork();
    if (seconds !== 0) w.tag(1, 0).int64(seconds);
    if (nanos !== 0) w.tag(2, 0).int32(nanos);
    w.join();
  }
  for (const f of md.finalizers) w.tag(9, 2).string(f);
  for (const [field, map] of [
    [10, md.labels],
    [11, md.annotations],
  ] as const) {
    for (const [k, v] of Object.entries(map)) {
      w.tag(field, 2).fork();
      str(1, k);
      str(2, v);
      w.join();
    }
  }
  w.join();
  w.tag(2, 2).fork();
  if (r.spec.protoSpec.length > 0) w.tag(1, 2).bytes(r.spec.protoSpec);
  w.join();
  const plain = w.finish().length;
  // Omni's etcd marshaler compresses 2 KiB and more (zstd, 2 bytes of header; Node 20 has no zstd,
  // deflate is close enough for a budget), then encrypts (AES-GCM: a version byte, a 12-byte nonce and
  // a 16-byte tag).
  const stored = plain >= 2048 ? 2 + deflateRawSync(w.finish()).length : plain;
  return stored + 1 + 12 + 16;
}
