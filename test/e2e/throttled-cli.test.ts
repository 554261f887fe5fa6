// The built CLI under Omni 1.9's write budget for infra providers (the sim's throttle, docs/omni-behaviour.md "The
// etcd write budget"), as a Job runs it: JSON logs off a terminal, the JSON result, the report and the audit log.
//   - Permanent is permanent: a write larger than the budget's burst is sent once; the run stops with exit 6.
//   - A lost answer is judged on what we sent.
//   - Only JSON on a JSON stream: a throttled --wait run, and a run that fails, write nothing on stderr that is not a
//     JSON record (no Node warning from the listeners the stub adds, the error itself a record).

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NS_INFRA_PROVIDER, T } from '../../src/omni-api/resource.js';
import { encodeSpec } from '../../src/omni-api/specs/codec.js';
import { InfraProviderStatusSpec } from '../../src/omni-api/specs/messages.js';
import { INTERNAL } from '../../src/omni-sim/api.js';
import { stubVersionText } from '../../src/provider/run/announce.js';
import { VERSION } from '../../src/version.js';
import type { FaultConfig } from '../../src/omni-sim/gateway/fault-config.js';
import { generateScenario } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { cleanEnv, requireBuiltCli, runCli, scratchDirEachTest } from '../helpers/cli-process.js';

const ID = 'kubevirt';
const sims: Sim[] = [];
requireBuiltCli();
const dir = scratchDirEachTest('throttled-cli-');
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

/** `requests` held MachineRequests of an SDK provider on Omni 1.9.3, with `faults` on. */
async function simOf(requests: number, faults: FaultConfig, o: { registered?: boolean } = {}): Promise<Sim> {
  const sc = generateScenario({ providerId: ID, machines: 0, requests, omniVersion: '1.9.3', faults });
  if (o.registered === false) sc.resources = sc.resources.filter((r) => r.metadata.type !== T.InfraProvider);
  const s = await createSim(sc);
  sims.push(s);
  await s.controllers?.idle();
  return s;
}

const args = (s: Sim, extra: string[] = []) => [
  '--id',
  ID,
  '--yes',
  '--omni-api-endpoint',
  s.endpoint,
  '--output',
  'json',
  '--report',
  join(dir(), 'report.json'),
  ...extra,
];
const envFor = (s: Sim) => cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`] });

/** The lines of stderr that are not a JSON object. */
function notJson(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l !== '')
    .filter((l) => {
      try {
        return typeof JSON.parse(l) !== 'object';
      } catch {
        return true;
      }
    });
}

describe('only JSON on a JSON stream', () => {
  it('a throttled --wait run with --log-format json: every stderr line is JSON (no MaxListeners warning)', async () => {
    // 40 requests of ~5 writes of ~400 bytes behind 20 KB/s: most writes wait in the window and in backoff.
    const s = await simOf(40, { throttle: { infraProvider: { bytesPerSecond: 20_000, burst: 2_000 }, maxWaitMs: 40 } });
    const r = await runCli(args(s, ['--wait', '--timeout', '60s', '--log-format', 'json']), {
      env: envFor(s),
      limitMs: 90_000,
    });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const rep = JSON.parse(r.stdout) as { result: string; throttling?: { signals: number } };
    expect(rep.result).toBe('done');
    expect(rep.throttling?.signals, 'the budget throttled the run').toBeGreaterThan(0);
    expect(notJson(r.stderr)).toEqual([]);
  }, 120_000);

  it('a failed run (exit 3), JSON logs by default off a terminal: the error is one JSON record', async () => {
    const s = await simOf(1, {}, { registered: false });
    const r = await runCli(args(s), { env: envFor(s) });
    expect(r.code).toBe(3);
    expect(notJson(r.stderr)).toEqual([]);
    const last = JSON.parse(r.stderr.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(last).toMatchObject({ level: 'error', code: 'STUB_NOT_REGISTERED', exitCode: 3, msg: expect.any(String) });
    // With pretty logs the error stays a line for a person.
    const pretty = await runCli(args(s, ['--log-format', 'pretty']), { env: envFor(s) });
    expect(pretty.code).toBe(3);
    expect(pretty.stderr).toMatch(/^stub-provider: .* \[STUB_NOT_REGISTERED\]$/m);
  }, 60_000);
});

describe('a lost answer is judged on what we sent', () => {
  it("the heartbeat Create's answer lost (Omni adds its label): exit 0, the write found applied", async () => {
    const s = await simOf(3, { loseWriteAnswers: { count: 1, method: 'Create' } });
    const r = await runCli(args(s, ['--audit-log', join(dir(), 'audit.ndjson')]), { env: envFor(s) });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(s.faults.config.loseWriteAnswers?.count, 'the answer was lost').toBe(0);
    const rep = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(rep).toMatchObject({
      result: 'done',
      deregistration: { status: 'deregistered' },
      throttling: { lostAnswers: 1, foundApplied: 1, retriedWrites: 0 },
    });
    expect(rep.released).toHaveLength(3);
  }, 60_000);
});

describe("permanent is permanent: a write larger than Omni's burst", () => {
  /** The audit log's intents, as `method type/id`. */
  async function intents(file: string): Promise<string[]> {
    return (await readFile(file, 'utf8'))
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { event: string; op: string; resource: { type: string; id: string } })
      .filter((l) => l.event === 'intent')
      .map((l) => `${l.op} ${l.resource.type}/${l.resource.id}`);
  }

  it('an announcement too large: sent once, exit 6 STUB_WRITE_TOO_LARGE; writes, throttling in result', async () => {
    const s = await simOf(2, { throttle: { infraProvider: { bytesPerSecond: 100, burst: 100 }, maxWaitMs: 1000 } });
    const audit = join(dir(), 'audit.ndjson');
    const r = await runCli(args(s, ['--audit-log', audit]), { env: envFor(s) });
    expect(r.code, r.stderr.slice(-3000)).toBe(6);
    const rep = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(rep).toMatchObject({
      result: 'failed',
      exitCode: 6,
      error: {
        code: 'STUB_WRITE_TOO_LARGE',
        message: expect.stringMatching(
          /InfraProviderStatuses.*--storage-rate-limits-etcd-infra-provider-write-bytes-burst/,
        ),
      },
      writes: { 'update:failed': 1 },
      throttling: { tooLarge: 1, signals: 0 },
    });
    expect((await intents(audit)).filter((i) => i.includes('InfraProviderStatuses'))).toEqual([
      'update InfraProviderStatuses.omni.sidero.dev/kubevirt',
    ]);
    expect(s.faults.throttle!.stats().infraProvider.failedOversize).toBe(1);
  }, 60_000);

  it('an item write: the run stops at once, exit 6; no write sent twice', async () => {
    const s = await simOf(6, { throttle: { infraProvider: { bytesPerSecond: 100, burst: 100 }, maxWaitMs: 1000 } });
    // The ProviderStatus already says stub mode: the first write Omni charges is an item's.
    const status = s.store.peek({ namespace: NS_INFRA_PROVIDER, type: T.InfraProviderStatus, id: ID })!;
    const text = stubVersionText(VERSION);
    s.store.update(
      INTERNAL,
      {
        ...status,
        spec: {
          protoSpec: encodeSpec(InfraProviderStatusSpec, {
            schema: '',
            name: ID,
            description: `${text}: an earlier run`,
            icon: '',
            version: text,
          }),
        },
      },
      status.metadata.owner,
    );
    const audit = join(dir(), 'audit.ndjson');
    const r = await runCli(args(s, ['--audit-log', audit]), { env: envFor(s) });
    expect(r.code, r.stderr.slice(-3000)).toBe(6);
    const rep = JSON.parse(r.stdout) as { error: { code: string }; throttling: { tooLarge: number } };
    expect(rep.error.code).toBe('STUB_WRITE_TOO_LARGE');
    expect(rep.throttling.tooLarge).toBeGreaterThanOrEqual(1);
    const sent = await intents(audit);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.filter((i) => i.includes('InfraProviderStatuses'))).toEqual([]);
    expect(new Set(sent).size, sent.join('\n')).toBe(sent.length);
  }, 60_000);
});
