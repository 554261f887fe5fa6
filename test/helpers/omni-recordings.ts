// The recordings of a real Omni's answers (the shared folder's `omni-recordings/`, see its README):
// loading every `omni-v<version>.ndjson` there (a newer recording is picked up without a change of
// ours), the README's normalisation, and the comparison of an answer with the recorded one field by
// field (HTTP status, gRPC code, message, body, and the response headers the recordings keep). Read
// from the shared folder, never copied.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeSpec, encodeSpec } from '../../src/omni-api/specs/codec.js';
import { SysVersionSpec } from '../../src/omni-api/specs/messages.js';
import { sharedPath } from './shared-data.js';

export interface RecordedRequest {
  method: string;
  path: string;
  /** The gRPC method name (the last path element), e.g. `Get`. */
  rpc: string;
  body: unknown;
  /** Sent exactly as is (malformed JSON); null otherwise. */
  raw_body: string | null;
  signed: boolean;
  extra: { skew?: number; signed_method?: string };
  headers: Record<string, string>;
}

export interface RecordedResponse {
  status: number;
  headers: Record<string, string>;
  /** Every NDJSON line of the body, parsed (gzip already decoded). */
  lines: unknown[];
}

export interface RecordedExchange {
  n: number;
  step: string;
  as: 'provider' | 'admin' | 'nobody';
  request: RecordedRequest;
  response: RecordedResponse;
}

export interface Recording {
  /** The file name, e.g. `omni-v1.3.4.ndjson`. */
  file: string;
  /** The Omni version it was recorded against, from the file name: `1.3.4`. */
  omniVersion: string;
  exchanges: RecordedExchange[];
}

const RECORDING_RE = /^omni-v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\.ndjson$/;

/** The folder of the recordings in the shared data. */
export function recordingsDir(): string {
  return sharedPath('omni-recordings');
}

/** Every recording there, oldest Omni first. An empty folder is an error, not a pass. */
export function loadRecordings(): Recording[] {
  const dir = recordingsDir();
  const files = readdirSync(dir).filter((f) => RECORDING_RE.test(f));
  if (files.length === 0) throw new Error(`${dir} holds no omni-v<version>.ndjson recording`);
  const out = files.map((file): Recording => {
    const text = readFileSync(join(dir, file), 'utf8');
    const exchanges = text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l, i) => {
        try {
          return JSON.parse(l) as RecordedExchange;
        } catch (e) {
          throw new Error(`${file}:${i + 1}: not JSON: ${(e as Error).message}`, { cause: e });
        }
      });
    return { file, omniVersion: RECORDING_RE.exec(file)?.[1] ?? '', exchanges };
  });
  const key = (v: string) =>
    v
      .split(/[.-]/)
      .map((x) => (/^\d+$/.test(x) ? x.padStart(6, '0') : x))
      .join('.');
  return out.sort((a, b) => (key(a.omniVersion) < key(b.omniVersion) ? -1 : 1));
}

/** The recordings' sim scenario with `omni.version` set to the recording's version. */
export function recordingScenario(omniVersion: string): string {
  const text = readFileSync(join(recordingsDir(), 'scenario.yaml'), 'utf8');
  if (!/^omni:\s*\{\s*version:\s*"[^"]*"\s*\}\s*$/m.test(text)) {
    throw new Error('scenario.yaml: expected a one-line `omni: { version: "..." }` header to set the version in');
  }
  return text.replace(/^omni:\s*\{\s*version:\s*"[^"]*"\s*\}\s*$/m, `omni: { version: "${omniVersion}" }`);
}

// ---------------------------------------------------------------------------------------------
// Normalisation (the README: what must differ between two servers)

const ZERO_TIME = '1970-01-01T00:00:00Z';
const SYS_VERSION_TYPE = 'SysVersions.system.sidero.dev';

/**
 * A recorded or replayed line with what may differ between two servers replaced by placeholders:
 * `created`/`updated` other than the zero time, bookmark bytes, and the SysVersion's instance name
 * (in its proto_spec and its yaml_spec). Everything else is kept, including which fields are present.
 */
export function normaliseLine(line: unknown): unknown {
  return normalise(line, undefined);
}

function normalise(v: unknown, key: string | undefined): unknown {
  if (Array.isArray(v)) return v.map((x) => normalise(x, undefined));
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o)) out[k] = normalise(x, k);
    if (isSysVersion(o)) out['spec'] = normaliseSysVersionSpec(out['spec']);
    return out;
  }
  if ((key === 'created' || key === 'updated') && typeof v === 'string' && v !== ZERO_TIME) return '<time>';
  if (key === 'bookmark' && typeof v === 'string') return '<bookmark>';
  return v;
}

function isSysVersion(o: Record<string, unknown>): boolean {
  const md = o['metadata'];
  return (
    typeof md === 'object' && md !== null && (md as Record<string, unknown>)['type'] === SYS_VERSION_TYPE && 'spec' in o
  );
}

function normaliseSysVersionSpec(spec: unknown): unknown {
  if (typeof spec !== 'object' || spec === null) return spec;
  const s = { ...(spec as Record<string, unknown>) };
  if (typeof s['proto_spec'] === 'string') {
    try {
      const d = decodeSpec(SysVersionSpec, new Uint8Array(Buffer.from(s['proto_spec'], 'base64')));
      s['proto_spec'] = Buffer.from(
        encodeSpec(SysVersionSpec, { ...d.value, instance_name: '<instance>' }, d.unknown),
      ).toString('base64');
    } catch {
      // Bytes that do not decode are compared as they are.
    }
  }
  if (typeof s['yaml_spec'] === 'string')
    s['yaml_spec'] = s['yaml_spec'].replace(/^instancename: .*$/m, 'instancename: <instance>');
  return s;
}

// ---------------------------------------------------------------------------------------------
// Comparison

/** The gRPC status of an answer: from `{code,message}` or `{"error":{code,message}}` lines; 0 and "" when none. */
export function statusOfLines(lines: unknown[]): { code: number; message: string } {
  for (const l of lines) {
    if (typeof l !== 'object' || l === null) continue;
    const o = l as Record<string, unknown>;
    const e = (typeof o['error'] === 'object' && o['error'] !== null ? o['error'] : o) as Record<string, unknown>;
    if (typeof e['code'] === 'number' || typeof e['message'] === 'string') {
      return {
        code: typeof e['code'] === 'number' ? e['code'] : 2,
        message: typeof e['message'] === 'string' ? e['message'] : '',
      };
    }
  }
  return { code: 0, message: '' };
}

export const FIELDS = ['status', 'code', 'message', 'body', 'headers'] as const;

/** The response headers compared: the ones the recordings keep (content type, compression, the auth challenge). */
export const COMPARED_HEADERS = [
  'content-type',
  'content-encoding',
  'grpc-metadata-content-type',
  'www-authenticate',
] as const;
export type Field = (typeof FIELDS)[number];

export interface Answer {
  status: number;
  /** Names lower-cased. */
  headers: Record<string, string | string[] | undefined>;
  lines: unknown[];
}

function comparedHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const lower = Object.fromEntries(
    Object.entries(h).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v.join(', ') : v]),
  );
  const out: Record<string, string> = {};
  for (const k of COMPARED_HEADERS) if (lower[k] !== undefined) out[k] = lower[k] as string;
  return out;
}

export interface Comparison {
  n: number;
  step: string;
  match: Record<Field, boolean>;
  /** What differed, for the failure message (empty when everything matched). */
  differences: string[];
}

/** One exchange's answer against the recording, field by field, after normalisation. */
export function compareAnswer(ex: RecordedExchange, got: Answer): Comparison {
  const want = statusOfLines(ex.response.lines);
  const have = statusOfLines(got.lines);
  const wantBody = ex.response.lines.map(normaliseLine);
  const haveBody = got.lines.map(normaliseLine);
  const match: Record<Field, boolean> = {
    status: got.status === ex.response.status,
    code: have.code === want.code,
    message: have.message === want.message,
    body: canonical(haveBody) === canonical(wantBody),
    headers: canonical(comparedHeaders(got.headers)) === canonical(comparedHeaders(ex.response.headers)),
  };
  const differences: string[] = [];
  if (!match.status) differences.push(`status ${got.status}, Omni ${ex.response.status}`);
  if (!match.code) differences.push(`code ${have.code}, Omni ${want.code}`);
  if (!match.message) differences.push(`message ${JSON.stringify(have.message)}, Omni ${JSON.stringify(want.message)}`);
  if (!match.body) differences.push(`body ${lineDiff(haveBody, wantBody)}`);
  if (!match.headers)
    differences.push(
      `headers ${JSON.stringify(comparedHeaders(got.headers))}, Omni ` +
        `${JSON.stringify(comparedHeaders(ex.response.headers))}`,
    );
  return { n: ex.n, step: ex.step, match, differences };
}

function lineDiff(have: unknown[], want: unknown[]): string {
  if (have.length !== want.length) {
    return (
      `${have.length} lines, Omni ${want.length}: ${have.map((l) => JSON.stringify(l)).join(' | ')} -- Omni: ` +
      `${want.map((l) => JSON.stringify(l)).join(' | ')}`
    );
  }
  const i = have.findIndex((l, k) => canonical(l) !== canonical(want[k]));
  return `line ${i}: ${JSON.stringify(have[i])} -- Omni: ${JSON.stringify(want[i])}`;
}

/**
 * JSON text with object keys sorted: the order of keys means nothing in JSON (Go's encoder sorts map
 * keys, ours keeps insertion order), the order of array items does.
 */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    typeof x === 'object' && x !== null && !Array.isArray(x)
      ? Object.fromEntries(
          Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : x,
  );
}

/** Per-field counts of matches. */
export function countMatches(cs: Comparison[]): Record<Field, number> & { exchanges: number; all: number } {
  const out = { exchanges: cs.length, all: 0, status: 0, code: 0, message: 0, body: 0, headers: 0 };
  for (const c of cs) {
    for (const f of FIELDS) if (c.match[f]) out[f]++;
    if (FIELDS.every((f) => c.match[f])) out.all++;
  }
  return out;
}
