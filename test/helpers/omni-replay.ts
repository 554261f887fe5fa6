// Replays a recording of a real Omni (omni-recordings.ts) against a simulated Omni over loopback
// HTTP: each exchange re-signed as its role (provider, admin, nobody; with the recorded skew or
// another signed method), sent with the recorded body (or raw body), method and headers, in order;
// the answer read the way the recorder read it (a watch until its lines have come and then a quiet
// spell, so that an extra line shows). The README's side writes during a watch are made here too.

import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { request } from 'undici';
import type { Sim } from '../../src/omni-sim/index.js';
import {
  compareAnswer,
  type Answer,
  type Comparison,
  type RecordedExchange,
  type Recording,
} from './omni-recordings.js';
import { rawCall, signHeaders, type RawKey } from './raw-client.js';

/** How long a watch stays quiet after its recorded lines before the replay stops reading it. */
const WATCH_QUIET_MS = 300;
/** A watch is cut after this long in any case (the recorder read 1.5 s, the one with writes 4 s). */
const WATCH_MAX_MS = 3_000;
const WATCH_WITH_WRITES_MAX_MS = 6_000;

export interface ReplayKeys {
  provider: RawKey;
  admin: RawKey;
}

/**
 * The provider `infra-provider:rec` and an Admin identity of the recordings' scenario, as the sim generated their keys.
 */
export function replayKeys(sim: Sim): ReplayKeys {
  const key = (name: string | undefined): RawKey => {
    const k = name === undefined ? undefined : sim.generatedKeys[name];
    if (!k) throw new Error(`the recordings' scenario has no generated key for ${name ?? 'an Admin identity'}`);
    return { name: k.name, armoredPrivateKey: k.armoredPrivateKey };
  };
  const admin = sim.scenario.identities.find((i) => i.role === 'Admin')?.name;
  return { provider: key('infra-provider:rec'), admin: key(admin) };
}

type SideWrites = (call: (method: string, body: unknown) => Promise<void>) => Promise<void>;

const W1 = { namespace: 'infra-provider:rec', type: 'MachineStatus.rec.infraprovider.sidero.dev', id: 'w1' };
const W1_OWNER = 'rec.MachineStatusController';

/**
 * What the recorder did while a watch was open (the README): keyed by the exchange's step. Starting
 * about 0.5 s into the stream, the provider created, updated (label k=c) and destroyed w1.
 */
const DURING: Record<string, { afterMs: number; writes: SideWrites }> = {
  'watch kind, bootstrap, then changes': {
    afterMs: 500,
    writes: async (call) => {
      await call('Create', {
        resource: { metadata: { ...W1, version: 'undefined', phase: 'running' }, spec: {} },
        options: { owner: W1_OWNER },
      });
      await call('Update', {
        new_resource: {
          metadata: { ...W1, version: '1', phase: 'running', owner: W1_OWNER, labels: { k: 'c' } },
          spec: {},
        },
        options: { owner: W1_OWNER },
      });
      await call('Destroy', { ...W1, options: { owner: W1_OWNER } });
    },
  },
};

/** Replays every exchange of the recording, in order, and compares each answer with Omni's. */
export async function replayRecording(
  sim: Sim,
  rec: Recording,
  keys: ReplayKeys = replayKeys(sim),
): Promise<Comparison[]> {
  const out: Comparison[] = [];
  for (const ex of rec.exchanges) out.push(compareAnswer(ex, await replayExchange(sim, ex, keys)));
  return out;
}

export async function replayExchange(sim: Sim, ex: RecordedExchange, keys: ReplayKeys): Promise<Answer> {
  const req = ex.request;
  const key = ex.as === 'provider' ? keys.provider : ex.as === 'admin' ? keys.admin : undefined;
  const sig =
    key && req.signed
      ? await signHeaders(key, `/cosi.resource.State/${req.rpc}`, {
          ...(req.extra.skew !== undefined ? { timestamp: Math.floor(sim.clock.now() / 1000) + req.extra.skew } : {}),
          ...(req.extra.signed_method !== undefined ? { signMethod: req.extra.signed_method } : {}),
        })
      : {};
  const body = req.raw_body ?? (req.body === null ? undefined : recorderJson(req.body));
  const during = DURING[ex.step];
  const isWatch = req.rpc === 'Watch';
  const ac = new AbortController();
  const res = await request(`${sim.endpoint}${req.path}`, {
    method: req.method as 'POST',
    headers: { 'content-type': 'application/json', ...sig, ...req.headers },
    ...(body !== undefined ? { body } : {}),
    signal: ac.signal,
  });
  const src: Readable =
    res.headers['content-encoding'] === 'gzip'
      ? (res.body as unknown as Readable).pipe(createGunzip())
      : (res.body as unknown as Readable);
  const lines = await readLines(src, {
    ...(isWatch && res.statusCode === 200
      ? {
          expected: ex.response.lines.length,
          quietMs: WATCH_QUIET_MS,
          maxMs: during ? WATCH_WITH_WRITES_MAX_MS : WATCH_MAX_MS,
        }
      : {}),
    ...(during && res.statusCode === 200 ? { during: sideWrites(sim, keys.provider, during) } : {}),
  });
  ac.abort();
  return { status: res.statusCode, headers: res.headers, lines };
}

/**
 * JSON text as the recorder wrote it (Python's json.dumps: `", "` and `": "` between items, non-ASCII
 * escaped). The bytes matter: Omni's protojson errors name the column of what they refuse
 * (`proto: (line 1:95): unknown field "bogus"` is where the recorder's text has it).
 */
export function recorderJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(recorderJson).join(', ')}]`;
  if (typeof v === 'object' && v !== null) {
    return `{${Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${recorderJson(k)}: ${recorderJson(x)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(v).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function sideWrites(sim: Sim, key: RawKey, d: { afterMs: number; writes: SideWrites }): () => Promise<void> {
  return async () => {
    await new Promise((r) => setTimeout(r, d.afterMs));
    await d.writes(async (method, body) => {
      const r = await rawCall(sim.endpoint, key, method, body);
      if (r.status !== 200) throw new Error(`the replay's ${method} during the watch failed: ${r.status} ${r.text}`);
    });
  };
}

interface ReadOptions {
  /** A stream: stop once this many lines came and then nothing for `quietMs`, or after `maxMs`. */
  expected?: number;
  quietMs?: number;
  maxMs?: number;
  /** Started once the answer's headers are in (writes while a watch is open). */
  during?: () => Promise<void>;
}

/** Reads the body as NDJSON lines (a unary body is one line), parsed; a line that is not JSON is kept as text. */
async function readLines(src: Readable, o: ReadOptions): Promise<unknown[]> {
  const texts: string[] = [];
  let buf = '';
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  src.setEncoding('utf8');
  src.on('data', (chunk: string) => {
    buf += chunk;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      if (buf.slice(0, i).trim() !== '') texts.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    wake?.();
  });
  const done = new Promise<void>((resolve) => {
    src.on('end', () => {
      ended = true;
      resolve();
    });
    src.on('error', () => {
      ended = true;
      resolve();
    });
    src.on('close', () => {
      ended = true;
      resolve();
    });
  });
  const writes = o.during?.().catch((e: unknown) => {
    failure = e;
  });
  if (o.expected === undefined) {
    await done;
  } else {
    const start = Date.now();
    let lastCount = -1;
    let lastChange = Date.now();
    while (!ended && Date.now() - start < (o.maxMs ?? WATCH_MAX_MS)) {
      if (texts.length !== lastCount) {
        lastCount = texts.length;
        lastChange = Date.now();
      }
      if (texts.length >= o.expected && Date.now() - lastChange >= (o.quietMs ?? WATCH_QUIET_MS)) break;
      await new Promise<void>((r) => {
        const t = setTimeout(r, 25);
        wake = () => {
          clearTimeout(t);
          r();
        };
      });
      wake = undefined;
    }
    src.destroy();
  }
  await writes;
  if (failure !== undefined) throw failure;
  if (buf.trim() !== '') texts.push(buf);
  return texts.map((t) => {
    try {
      return JSON.parse(t) as unknown;
    } catch {
      return t;
    }
  });
}
