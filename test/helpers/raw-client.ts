// A deliberately small gateway client for tests of the simulated Omni: its own signing and HTTP,
// independent of src/omni-client, so the sim is not only ever checked by the code it is meant to test.

import * as openpgp from 'openpgp';
import { request } from 'undici';

export interface RawKey {
  name: string;
  armoredPrivateKey: string;
}

export interface RawCallOptions {
  /** Override the signed timestamp (seconds). */
  timestamp?: number;
  /** Sign for this method instead of the called one. */
  signMethod?: string;
  /** Tamper with the payload after signing. */
  tamper?: (payload: string) => string;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** No signature headers at all. */
  unsigned?: boolean;
  httpMethod?: string;
  body?: string;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Parsed JSON for unary bodies; the parsed lines for streams. */
  json: unknown;
  lines: unknown[];
}

export async function signHeaders(
  key: RawKey,
  method: string,
  opts: RawCallOptions = {},
): Promise<Record<string, string>> {
  const ts = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
  const payload = JSON.stringify({ headers: { 'x-sidero-timestamp': [ts] }, method: opts.signMethod ?? method });
  const privateKey = await openpgp.readPrivateKey({ armoredKey: key.armoredPrivateKey });
  const sig = await openpgp.sign({
    message: await openpgp.createMessage({ binary: new TextEncoder().encode(payload) }),
    signingKeys: privateKey,
    detached: true,
    format: 'binary',
  });
  const fp = privateKey.getFingerprint();
  return {
    'grpc-metadata-x-sidero-timestamp': ts,
    'grpc-metadata-x-sidero-payload': opts.tamper ? opts.tamper(payload) : payload,
    'grpc-metadata-x-sidero-signature':
      `siderov1 ${key.name} ${fp} ` + `${Buffer.from(sig as Uint8Array).toString('base64')}`,
  };
}

/** POST /api/cosi.resource.State/<method> with a JSON body; reads the whole response. */
export async function rawCall(
  endpoint: string,
  key: RawKey | undefined,
  method: string,
  body: unknown,
  opts: RawCallOptions = {},
): Promise<RawResponse> {
  const grpcMethod = `/cosi.resource.State/${method}`;
  const sig = key && !opts.unsigned ? await signHeaders(key, grpcMethod, opts) : {};
  const res = await request(`${endpoint}/api/cosi.resource.State/${method}`, {
    method: (opts.httpMethod ?? 'POST') as 'POST',
    headers: { 'content-type': 'application/json', ...sig, ...(opts.headers ?? {}) },
    body: opts.body ?? JSON.stringify(body),
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const lines = text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as unknown;
      } catch {
        return l;
      }
    });
  return { status: res.statusCode, headers: res.headers, text, json, lines };
}
