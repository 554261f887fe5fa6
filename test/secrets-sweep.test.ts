// No secret is ever echoed (docs/design.md rule 9, src/redact.ts): the provider's key and a URL with
// a password, given by mistake to every flag that takes a value of every command (from the option
// tables), as the flag and as its STUB_PROVIDER_ variable, and as OMNI_ENDPOINT and the key
// variables, each in turn, through the CLI's main() in this process: neither comes back out on
// stdout, on stderr (logs included), in --report or in --audit-log, and both files are 0600.

import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli.js';
import { COMMANDS } from '../src/commands/index.js';
import { createSim } from '../src/omni-sim/index.js';
import type { Sim } from '../src/omni-sim/index.js';
import { generateScenario } from '../src/omni-sim/scenario/generate.js';

const ID = 'bm';
const PASSWORD = 'hunter2-s3cret';
const URL_WITH_PASSWORD = `htps://admin:${PASSWORD}@omni.example.com`;
const SCENARIO = join(process.cwd(), 'scenarios', 'bare-metal-stuck.yaml');

let dir: string;
const home = process.cwd();
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'secrets-sweep-'));
});
afterAll(() => {
  process.chdir(home);
  rmSync(dir, { recursive: true, force: true });
});

interface Case {
  name: string;
  command: string;
  argv: string[];
  env: NodeJS.ProcessEnv;
}

/** Every flag that takes a value, of every command, from the option tables. */
function valueFlags(): { command: string; flag: string }[] {
  return Object.entries(COMMANDS).flatMap(([command, c]) =>
    Object.entries(c.options)
      .filter(([, o]) => o.type !== 'boolean')
      .map(([flag]) => ({ command, flag })),
  );
}

/** What a command needs besides the flag under test (never the flag itself). */
function baseArgs(command: string, flag: string, files: { report: string; audit: string }): string[] {
  const out: string[] = [];
  const add = (f: string, v: string) => {
    if (f !== flag) out.push(`--${f}`, v);
  };
  if (command === 'run' || command === 'plan') {
    add('id', ID);
    add('output', 'json');
    add('report', files.report);
    add('step-timeout', '2s');
    if (command === 'run') {
      out.push('--yes');
      add('audit-log', files.audit);
    }
  }
  if (command === 'sim') {
    add('scenario', SCENARIO);
    add('listen', '127.0.0.1:0');
  }
  if (command === 'demo') add('output', 'json');
  return [command, ...out];
}

/**
 * `sim` prints the keys of its own identities by design. They are not the key under test, but two keys
 * share their fixed structure (packet headers, the signature's preferences): a 24-character slice of
 * one is found in the other in about 1 pair of 20. They are taken out before the search.
 */
function withoutSimKeys(out: string): string {
  let text = out;
  for (const m of out.matchAll(/"keys":(\{[^}]*\})/g))
    for (const v of Object.values(JSON.parse(m[1]!) as Record<string, string>)) text = text.split(v).join('<sim key>');
  return text;
}

/** Runs main() with captured streams; a sim that came up is stopped as a signal would stop it. */
async function runMain(c: Case): Promise<{ code: number; out: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let ready = false;
  stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (c.command === 'sim' && !ready && out.includes('"endpoint"')) {
      ready = true;
      setImmediate(() => process.emit('SIGTERM', 'SIGTERM'));
    }
  });
  stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await main(c.argv, c.env, { stdout, stderr });
  return { code, out };
}

describe('no secret is ever echoed', () => {
  let sim: Sim;
  let key: string;
  let armoredLine: string;

  beforeAll(async () => {
    sim = await createSim(generateScenario({ providerId: ID, machines: 1, omniVersion: '1.9.3' }));
    key = sim.keys[`infra-provider:${ID}`]!;
    const armored = (JSON.parse(Buffer.from(key, 'base64').toString()) as { pgp_key: string }).pgp_key;
    armoredLine = armored.split('\n').find((l) => l.length >= 60)!;
  });
  afterAll(async () => {
    await sim.close();
  });

  function leaks(text: string): string[] {
    const found: string[] = [];
    // Between the parts every key shares: the base64 of `{"name":"infra-provider:`, the armor and the
    // key's packet header at the start, the armor's end (the sim's own keys are printed by design).
    for (let i = 160; i + 24 <= key.length - 100; i += 8)
      if (text.includes(key.slice(i, i + 24))) {
        found.push('a 24-character slice of the key');
        break;
      }
    if (text.includes('BEGIN PGP')) found.push('BEGIN PGP');
    if (text.includes(armoredLine)) found.push('a line of the armored key');
    if (text.includes(PASSWORD)) found.push('the password');
    return found;
  }

  it('through every flag of every command, its variable, OMNI_ENDPOINT and the key variables', async () => {
    const cases: Case[] = [];
    let n = 0;
    for (const [what, value] of [
      ['key', key],
      ['url', URL_WITH_PASSWORD],
    ] as const) {
      const env = { OMNI_ENDPOINT: sim.endpoint, OMNI_SERVICE_ACCOUNT_KEY: key, NO_COLOR: '1' };
      for (const { command, flag } of valueFlags()) {
        const files = { report: join(dir, `r${n}.json`), audit: join(dir, `a${n++}.ndjson`) };
        const base = baseArgs(command, flag, files);
        const variable = `STUB_PROVIDER_${flag.toUpperCase().replace(/-/g, '_')}`;
        cases.push({ name: `${command} --${flag} <${what}>`, command, argv: [...base, `--${flag}`, value], env });
        cases.push({
          name: `${command} ${variable}=<${what}>`,
          command,
          argv: base,
          env: { ...env, [variable]: value },
        });
      }
      for (const variable of ['OMNI_ENDPOINT', 'OMNI_SERVICE_ACCOUNT_KEY', 'SIDERO_SERVICE_ACCOUNT_KEY']) {
        const files = { report: join(dir, `r${n}.json`), audit: join(dir, `a${n++}.ndjson`) };
        for (const command of ['run', 'plan'])
          cases.push({
            name: `${command} ${variable}=<${what}>`,
            command,
            argv: baseArgs(command, '', files),
            env: { ...env, [variable]: value },
          });
      }
    }
    const failures: string[] = [];
    for (const c of cases) {
      // Each case in a folder of its own: a value that is taken as a path makes it there.
      const cwd = mkdtempSync(join(dir, 'case-'));
      process.chdir(cwd);
      try {
        const { code, out } = await runMain(c);
        const where: [string, string][] = [['stdout and stderr', c.command === 'sim' ? withoutSimKeys(out) : out]];
        for (const f of c.argv.filter((a) => a.startsWith(dir) && existsSync(a))) {
          where.push([f, readFileSync(f, 'utf8')]);
          const mode = statSync(f).mode & 0o777;
          if (mode !== 0o600) failures.push(`${c.name}: ${f} has mode ${mode.toString(8)}`);
        }
        for (const [w, text] of where) {
          const l = leaks(text);
          if (l.length) failures.push(`${c.name} (exit ${code}): ${l.join(', ')} in ${w}`);
        }
      } finally {
        process.chdir(home);
      }
    }
    expect(cases.length).toBeGreaterThan(200);
    expect(failures).toEqual([]);
  }, 600_000);
});
