// Golden vectors of spec messages, from two sources, in one shape ({message, case, json, proto_b64},
// protojson with proto names beside the wire bytes):
// - Omni's own message types: the Go peer test/go/specs-golden (`vectors`), which also runs as a
//   filter that decodes, encodes and compares bytes with those types (`filter`);
// - every vector file in the shared folder's golden/ (the bare-metal provider's messages), read
//   from there (test/helpers/shared-data.ts), never copied.

import { spawn, execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import * as BM from '../../src/omni-api/specs/bare-metal.js';
import * as M from '../../src/omni-api/specs/messages.js';
import type { MessageSchema } from '../../src/omni-api/specs/schema.js';
import { sharedPath } from './shared-data.js';

export type AnySchema = MessageSchema<unknown>;

export interface GoldenVector {
  message: string;
  case: string;
  /** protojson of the message, proto field names, zero values left out. */
  json: Record<string, unknown>;
  proto_b64: string;
  /** The top-level message's unknown fields, as the writer kept them (Go vectors only). */
  unknown_b64?: string;
  /** Bytes no marshaller writes (a field twice, fields out of order): what Go writes for the message read. */
  marshalled_b64?: string;
  /** Bytes Go refuses, and its reason: a decoder must refuse them too (no json then). */
  invalid?: string;
}

export interface VectorFile {
  /** Where the vectors come from, for test names. */
  name: string;
  source: string;
  vectors: GoldenVector[];
}

const TIMEOUT_MS = 60_000;

function parseVectorFile(name: string, text: string): VectorFile {
  const d = JSON.parse(text) as { source?: unknown; vectors?: unknown };
  if (typeof d.source !== 'string' || !Array.isArray(d.vectors))
    throw new Error(`${name}: not a vector file ({source, vectors: [...]})`);
  const vectors = d.vectors.map((v: Partial<GoldenVector>, i): GoldenVector => {
    const hasJson = typeof v.json === 'object' && v.json !== null;
    if (
      typeof v.message !== 'string' ||
      typeof v.case !== 'string' ||
      typeof v.proto_b64 !== 'string' ||
      hasJson === (typeof v.invalid === 'string')
    ) {
      throw new Error(`${name}: vector ${i} lacks message, case, proto_b64, or one of json and invalid`);
    }
    return v as GoldenVector;
  });
  if (vectors.length === 0) throw new Error(`${name}: no vectors`);
  return { name, source: d.source, vectors };
}

/** The Go peer's table. */
export function goVectors(binary: string): Promise<VectorFile> {
  return new Promise((resolve, reject) => {
    execFile(binary, ['vectors'], { timeout: TIMEOUT_MS, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${binary} vectors failed: ${err.message}\n${stderr}`));
      try {
        resolve(parseVectorFile("Omni's Go module", stdout));
      } catch (e) {
        reject(e as Error);
      }
    });
  });
}

/** Every `*.json` vector file in the shared golden/ folder. */
export function sharedVectorFiles(): VectorFile[] {
  const dir = sharedPath('golden');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  if (files.length === 0) throw new Error(`${dir} holds no vector files`);
  return files.map((f) => parseVectorFile(`shared/golden/${f}`, readFileSync(join(dir, f), 'utf8')));
}

export type FilterRequest =
  | { op: 'decode'; message: string; proto_b64: string }
  | { op: 'encode'; message: string; json: unknown }
  | { op: 'equal'; message: string; a_b64: string; b_b64: string };

export interface FilterReply {
  error?: string;
  json?: Record<string, unknown>;
  proto_b64?: string;
  unknown_b64?: string;
  equal?: boolean;
}

/** Sends the requests through `specs-golden filter` (one process) and answers its replies in order. */
export function goFilter(binary: string, requests: FilterRequest[]): Promise<FilterReply[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['filter'], { stdio: ['pipe', 'pipe', 'pipe'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`${binary} filter exited with ${code ?? signal}: ${err}`));
      const replies = out
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as FilterReply);
      if (replies.length !== requests.length)
        return reject(new Error(`${binary} filter answered ${replies.length} of ${requests.length} requests`));
      resolve(replies);
    });
    child.stdin.end(requests.map((r) => JSON.stringify(r)).join('\n') + '\n');
  });
}

function isSchema(v: unknown): v is AnySchema {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as AnySchema).name === 'string' &&
    Array.isArray((v as AnySchema).fields)
  );
}

/** Every message schema of src/omni-api/specs/{messages,bare-metal}.ts, nested ones included, by proto name. */
export function allSchemas(): Map<string, AnySchema> {
  const out = new Map<string, AnySchema>();
  const visit = (s: AnySchema): void => {
    const known = out.get(s.name);
    if (known) {
      if (known !== s) throw new Error(`two schemas are named ${s.name}`);
      return;
    }
    out.set(s.name, s);
    for (const f of s.fields) if (f.message) visit(f.message());
  };
  for (const v of [...Object.values(M), ...Object.values(BM)]) if (isSchema(v)) visit(v);
  return out;
}

export const fromB64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));
export const toB64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');
export const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/**
 * The top-level fields of a message as `<number>:<wire type>:<hex of the field's bytes>`, sorted by
 * field number (stable, so repeated fields keep their order): two writers that agree on every field
 * but order them differently give the same list.
 */
export function wireFields(bytes: Uint8Array): string[] {
  const r = new BinaryReader(bytes);
  const fields: Array<{ no: number; text: string }> = [];
  while (r.pos < r.len) {
    const start = r.pos;
    const [no, wireType] = r.tag();
    r.skip(wireType, no);
    fields.push({ no, text: `${no}:${wireType}:${hex(bytes.subarray(start, r.pos))}` });
  }
  return fields.sort((a, b) => a.no - b.no).map((f) => f.text);
}
