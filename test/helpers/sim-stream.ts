// Reads an NDJSON gateway stream line by line as it arrives (optionally gunzipping), for sim tests.
// Independent of src/omni-client on purpose.

import { createGunzip } from 'node:zlib';
import type { Readable } from 'node:stream';
import { request } from 'undici';
import { signHeaders, type RawKey } from './raw-client.js';

export interface OpenStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The next parsed line; rejects after `timeoutMs` or when the stream ends without one. */
  next(timeoutMs?: number): Promise<unknown>;
  /** The raw text of every line read so far. */
  rawLines: string[];
  /** Resolves when the body ends (or errors). */
  ended: Promise<'end' | 'error'>;
  close(): void;
}

export async function openStream(
  endpoint: string,
  key: RawKey | undefined,
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<OpenStream> {
  const sig = key ? await signHeaders(key, `/cosi.resource.State/${method}`) : {};
  const ac = new AbortController();
  const res = await request(`${endpoint}/api/cosi.resource.State/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...sig, ...headers },
    body: JSON.stringify(body),
    signal: ac.signal,
  });
  const gz = res.headers['content-encoding'] === 'gzip';
  const source: Readable = gz
    ? (res.body as unknown as Readable).pipe(createGunzip())
    : (res.body as unknown as Readable);
  if (gz) (res.body as unknown as Readable).on('error', (e) => source.destroy(e));
  const lines: string[] = [];
  const rawLines: string[] = [];
  const waiters: (() => void)[] = [];
  let buf = '';
  let done: 'end' | 'error' | undefined;
  const wake = () => waiters.splice(0).forEach((w) => w());
  source.setEncoding('utf8');
  source.on('data', (chunk: string) => {
    buf += chunk;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const l = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (l.trim() !== '') {
        lines.push(l);
        rawLines.push(l);
      }
    }
    wake();
  });
  const ended = new Promise<'end' | 'error'>((resolve) => {
    source.on('end', () => {
      done = 'end';
      wake();
      resolve('end');
    });
    source.on('error', () => {
      done = 'error';
      wake();
      resolve('error');
    });
  });
  return {
    status: res.statusCode,
    headers: res.headers,
    rawLines,
    ended,
    async next(timeoutMs = 3000) {
      const deadline = Date.now() + timeoutMs;
      while (lines.length === 0) {
        if (done) throw new Error(`stream ended (${done}) without another line`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no line within ${timeoutMs} ms`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, left);
          waiters.push(() => {
            clearTimeout(t);
            r();
          });
        });
      }
      return JSON.parse(lines.shift() as string) as unknown;
    },
    close() {
      ac.abort();
      source.destroy();
    },
  };
}
