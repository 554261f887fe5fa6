// The audit log holds every write that may have reached Omni, a SIGTERM in the middle of a run
// included: the built CLI against a simulated Omni in this process (so that the test sees what the
// sim applied). Reproduction: SIGTERM during a 1,500-machine run left sixteen writes that Omni
// applied without an audit line. The outputs opened before the first call to Omni, through main()
// in this process: test/commands/outputs-audit.test.ts.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Pointer } from '../../src/omni-api/resource.js';
import { T } from '../../src/omni-api/resource.js';
import { type Sim } from '../../src/omni-sim/index.js';
import type { AuditEntry, AuditIntent, AuditOutcome } from '../../src/provider/report/audit.js';
import type { Report } from '../../src/provider/report/report.js';
import { MAIN, requireBuiltCli, scratchDirEachTest } from '../helpers/cli-process.js';
import { env, ID, recordingSim as recordingSimOf, type Applied } from '../helpers/recording-sim.js';
import { simEachTest } from '../helpers/sim-client.js';
import { forward, startTamperProxy, type TamperProxy } from '../helpers/tamper-proxy.js';

let proxy: TamperProxy | undefined;
let applied: Applied[] = [];
requireBuiltCli();
const omni = simEachTest();
const dir = scratchDirEachTest('outputs-audit-');
beforeEach(() => {
  applied = [];
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

const recordingSim = async (machines: number, latencyMs = 0) =>
  omni.closing(await recordingSimOf(applied, machines, latencyMs));

interface Child {
  code: Promise<number | null>;
  stdout: () => string;
  stderr: () => string;
  kill: (sig: NodeJS.Signals) => void;
}

function stub(s: Sim, args: string[], endpoint = s.endpoint): Child {
  const child = spawn(process.execPath, [MAIN, ...args, '--omni-api-endpoint', endpoint], {
    env: env(s),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const code = new Promise<number | null>((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stub-provider ${args.join(' ')} did not exit within 60 s`));
    }, 60_000);
    child.on('exit', (c) => {
      clearTimeout(t);
      resolve(c);
    });
  });
  return { code, stdout: () => out, stderr: () => err, kill: (sig) => child.kill(sig) };
}

const WRITES = new Set(['Create', 'Update', 'Destroy']);

function parseAudit(text: string): { intents: AuditIntent[]; outcomes: AuditOutcome[] } {
  const lines = text
    .trimEnd()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEntry);
  return {
    intents: lines.filter((l): l is AuditIntent => l.event === 'intent'),
    outcomes: lines.filter((l): l is AuditOutcome => l.event === 'outcome'),
  };
}

/**
 * Every write the sim applied has an intent line (same method, resource, version and finalizers
 * asked for) whose outcome is ok or unknown, never failed, refused or not-applied; every intent has exactly one
 * outcome.
 */
function checkAudit(text: string): { intents: number; outcomes: Record<string, number>; appliedUnknown: number } {
  const { intents, outcomes } = parseAudit(text);
  const run = intents[0]?.run;
  expect(new Set([...intents, ...outcomes].map((l) => l.run))).toEqual(new Set([run]));
  expect(intents.map((i) => i.seq)).toEqual(intents.map((_, n) => n + 1));
  const bySeq = new Map<number, AuditOutcome[]>();
  for (const o of outcomes) bySeq.set(o.seq, [...(bySeq.get(o.seq) ?? []), o]);
  for (const i of intents) expect(bySeq.get(i.seq)?.length, `outcomes of seq ${i.seq}`).toBe(1);
  expect(outcomes).toHaveLength(intents.length);
  const unmatched = new Set(intents);
  let appliedUnknown = 0;
  const key = (m: string, p: Pointer) => `${m} ${p.namespace}/${p.type}/${p.id}`;
  const method = { create: 'Create', update: 'Update', teardown: 'Update', destroy: 'Destroy' } as const;
  for (const a of applied) {
    const hit = [...unmatched].find(
      (i) =>
        key(method[i.op], i.resource) === key(a.method, a.resource) &&
        (a.method !== 'Update' ||
          (i.versionBefore === a.version && JSON.stringify(i.finalizersAfter) === JSON.stringify(a.finalizers))),
    );
    expect(hit, `no intent line for the applied ${key(a.method, a.resource)}@${a.version ?? ''}`).toBeDefined();
    unmatched.delete(hit!);
    const result = bySeq.get(hit!.seq)![0]!.result;
    expect(['ok', 'unknown'], `the applied write seq ${hit!.seq}`).toContain(result);
    if (result === 'unknown') appliedUnknown++;
  }
  const counts: Record<string, number> = {};
  for (const o of outcomes) counts[o.result] = (counts[o.result] ?? 0) + 1;
  return { intents: intents.length, outcomes: counts, appliedUnknown };
}

describe('the audit log holds every write that may have reached Omni', () => {
  it('SIGTERM in a run of late answers: each applied write has its intent, each intent its outcome; 143', async () => {
    const s = await recordingSim(150, 2);
    // Every write reaches the sim at once; its answer is held 150 ms, as a slow link or a loaded
    // Omni would: at the signal, the writes in flight are applied and unanswered.
    proxy = await startTamperProxy(s.endpoint, (r) =>
      WRITES.has(r.rpc)
        ? forward(s.endpoint, r, (res, status, headers, body) => {
            setTimeout(() => {
              if (!res.destroyed) {
                res.writeHead(status, headers);
                res.end(body);
              }
            }, 150);
          })
        : undefined,
    );
    const file = join(dir(), 'audit.ndjson');
    const run = stub(
      s,
      [
        '--id',
        ID,
        '--yes',
        '--output',
        'json',
        '--log-format',
        'json',
        '--log-level',
        'warn',
        '--concurrency',
        '16',
        '--audit-log',
        file,
      ],
      proxy.endpoint,
    );
    // Signalled once a few hundred lines are in (bounded: 30 s).
    for (let i = 0; i < 1500; i++) {
      const text = existsSync(file) ? await readFile(file, 'utf8') : '';
      if (text.split('\n').length > 300) break;
      await delay(20);
    }
    run.kill('SIGTERM');
    expect(await run.code, run.stderr()).toBe(143);
    // Answers still held by the proxy, and Omni's controllers, settle.
    await delay(400);
    await s.controllers?.idle();
    const text = await readFile(file, 'utf8');
    const r = checkAudit(text);
    expect(applied.length).toBeGreaterThan(100);
    expect(applied.length).toBeLessThan(150 * 9);
    // The writes that reached Omni while their answers were in flight: before, they had no line.
    expect(r.appliedUnknown).toBeGreaterThan(0);
    const rep = JSON.parse(run.stdout()) as Report;
    expect(rep).toMatchObject({ result: 'interrupted', exitCode: 143, interrupted: true });
    // The report counts the same outcomes as the audit log.
    const byResult: Record<string, number> = {};
    for (const [k, v] of Object.entries(rep.writes)) byResult[k.split(':')[1]!] = (byResult[k.split(':')[1]!] ?? 0) + v;
    expect(byResult).toEqual(r.outcomes);
  }, 90_000);

  it('a write applied whose answer was cut off is read back, not sent again: outcome ok by read-back', async () => {
    const s = await recordingSim(1);
    let cut = 0;
    proxy = await startTamperProxy(s.endpoint, (r) => {
      // The InfraMachines' watch shows nothing (its cache is their List): no event names the machine.
      if (r.rpc === 'Watch' && (r.body as { type?: string } | undefined)?.type === T.InfraMachine)
        return { kind: 'lines', map: () => null };
      const type = (r.body as { new_resource?: { metadata?: { type?: string } } } | undefined)?.new_resource?.metadata
        ?.type;
      if (r.rpc !== 'Update' || type !== T.InfraMachine || cut++ > 0) return undefined;
      return forward(s.endpoint, r, (res) => {
        res.destroy();
      });
    });
    const file = join(dir(), 'audit.ndjson');
    const argv = ['--id', ID, '--yes', '--output', 'json', '--log-format', 'json', '--audit-log', file];
    const run = stub(s, argv, proxy.endpoint);
    // The client reads the InfraMachine back before sending anything again (omni-client/pressure.ts).
    // Found at the version the Update made: done (exit 0). Already destroyed by Omni (the release
    // let it go): NotFound, and the machine came from a List only (no watch event named it), so that
    // is not taken for done (design rule 4): exit 5, and the next run finds nothing left to do.
    const code = await run.code;
    expect([0, 5], run.stderr()).toContain(code);
    if (code === 5) expect(run.stderr()).toContain('nothing read this resource by its ID');
    await s.controllers?.idle();
    checkAudit(await readFile(file, 'utf8'));
    const { intents, outcomes } = parseAudit(await readFile(file, 'utf8'));
    // Sent once: one intent for the InfraMachine's Update, its outcome unknown (the broken answer).
    const ims = intents.filter((i) => i.resource.type === T.InfraMachine);
    expect(ims).toHaveLength(1);
    expect(cut).toBe(1);
    const o = outcomes.find((x) => x.seq === ims[0]!.seq)!;
    // Found applied by the read-back (exit 0): ok, with that evidence; gone before it (exit 5): unknown.
    expect(o).toMatchObject(
      code === 0
        ? { result: 'ok', evidence: 'read-back', errorCode: 'STUB_TRANSPORT' }
        : { result: 'unknown', errorCode: 'STUB_TRANSPORT' },
    );
    // The InfraMachine was released by that one Update.
    expect(s.store.all().filter((x) => x.metadata.type === T.InfraMachine)).toEqual([]);
    const again = stub(
      s,
      argv.map((a) => (a === file ? join(dir(), 'audit-again.ndjson') : a)),
      proxy.endpoint,
    );
    expect(await again.code, again.stderr()).toBe(0);
  }, 60_000);
});
