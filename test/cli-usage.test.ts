// The small things of the command line, through the CLI's main() in this process (its exit code and
// what it writes): `completion` (the shells run its scripts in test/commands/completion.test.ts), "did
// you mean" for commands and flags, --dry-run pointing to plan, the environment as flags
// (STUB_PROVIDER_NO_<FLAG>, an unknown variable named as one, the command line winning), and colour
// (NO_COLOR, --no-color).

import { afterEach, describe, expect, it } from 'vitest';
import { generateScenario } from '../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../src/omni-sim/index.js';
import { cleanEnv } from './helpers/cli-process.js';
import { runMain } from './helpers/in-process-cli.js';

const ID = 'bm';
const sims: Sim[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

async function sim(): Promise<Sim> {
  const s = await createSim(generateScenario({ providerId: ID, machines: 1, omniVersion: '1.3.4' }));
  sims.push(s);
  await s.controllers?.idle();
  return s;
}

const ESC = '\x1b[';

describe('completion', () => {
  it('`stub-provider completion bash|zsh|fish` prints a script for that shell, never calling it', async () => {
    const marks = {
      bash: /^complete -F _stub_provider stub-provider$/m,
      zsh: /^compdef _stub_provider stub-provider$/m,
    };
    for (const sh of ['bash', 'zsh', 'fish'] as const) {
      const r = await runMain(['completion', sh]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(sh === 'fish' ? /^complete -c stub-provider /m : marks[sh]);
      expect(r.stdout).not.toMatch(/get-yargs-completions/);
    }
  });

  it('the shell is required (exit 2 naming the three), an unknown one too; --help is help', async () => {
    for (const args of [['completion'], ['completion', 'tcsh']]) {
      const r = await runMain(args);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/bash.*zsh.*fish/);
    }
    const help = await runMain(['completion', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/stub-provider completion \[shell\]/);
    expect(help.stdout).not.toMatch(/^complete /m);
    expect((await runMain(['completion', 'bash', 'extra'])).code).toBe(2);
  });
});

describe('did you mean', () => {
  it.each([
    [['plna'], /unknown command "plna": did you mean plan\?/],
    [['--id', ID, '--machines', 'x'], /unknown flag --machines: did you mean --machine\?/],
    [
      ['--id', ID, '--dry-run'],
      /--dry-run: there is no such flag; `stub-provider plan` \(same --id and flags\) is the dry run/,
    ],
    [['plan', '--id', ID, '--wait'], /--wait is a flag of `stub-provider run`, not of `stub-provider plan`/],
    [
      ['plan', 'bare-metal'],
      /stub-provider plan takes no argument "bare-metal": values go after their flag, e.g. --id bare-metal/,
    ],
    [['--id', 'a', '--id', 'b', '--omni-api-endpoint', 'http://127.0.0.1:1'], /--id is given 2 times \(a, b\)/],
    [['--idd', 'bare-metal'], /unknown flag --idd: did you mean --id\?/],
  ])('%j', async (args, message) => {
    const r = await runMain(args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/Missing required argument/);
  });
});

describe('a refused value', () => {
  it('an invalid choice is one line naming the flag, the value and the choices (no literal \\n)', async () => {
    const r = await runMain(['--id', ID, '-o', 'jsn']);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe('stub-provider: --output "jsn": expected text, json or yaml');
    expect(r.stderr).not.toContain('\\n');
  });

  it('plan --wipe takes the strategies of run --wipe only', async () => {
    const r = await runMain(['plan', '--id', ID, '--from-dump', 'bare-metal-stuck', '--wipe', 'bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^stub-provider: --wipe "bogus": expected none, command, redfish-power-off/);
    const ok = await runMain([
      'plan',
      '--id',
      'bare-metal',
      '--from-dump',
      'bare-metal-stuck',
      '--wipe',
      'ipmi-power-off',
    ]);
    expect(ok.code, ok.stderr).toBe(10);
  });
});

describe('the environment as flags', () => {
  it('STUB_PROVIDER_NO_DEREGISTER=true is --no-deregister (the --help example)', async () => {
    const s = await sim();
    const r = await runMain(['plan', '--id', ID, '--omni-api-endpoint', s.endpoint, '-o', 'json'], {
      env: cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`]!, STUB_PROVIDER_NO_DEREGISTER: 'true' }),
    });
    expect(r.code, r.stderr).toBe(10);
    expect(JSON.parse(r.stdout)).toMatchObject({ deregistration: { status: 'disabled' } });
  });

  it("the command line wins over the environment; a variable of another command's flag is left alone", async () => {
    const s = await sim();
    const env = cleanEnv({
      OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`]!,
      STUB_PROVIDER_OUTPUT: 'yaml',
      STUB_PROVIDER_WAIT: 'true',
      STUB_PROVIDER_ID: 'not-this',
    });
    const r = await runMain(['plan', '--id', ID, '--omni-api-endpoint', s.endpoint, '--output', 'json'], { env });
    expect(r.code, r.stderr).toBe(10);
    expect(JSON.parse(r.stdout)).toMatchObject({ providerId: ID });
  });

  it('an unknown STUB_PROVIDER_ variable is named as an environment variable, with the nearest one', async () => {
    const foo = await runMain(['plan', '--id', ID], { env: cleanEnv({ STUB_PROVIDER_FOO: '1' }) });
    expect(foo.code).toBe(2);
    expect(foo.stderr).toMatch(/environment variable STUB_PROVIDER_FOO matches no flag of stub-provider/);
    expect(foo.stderr).not.toMatch(/Unknown argument/);
    const typo = await runMain(['plan', '--id', ID], { env: cleanEnv({ STUB_PROVIDER_MAX_LIST_ITEM: '5' }) });
    expect(typo.stderr).toMatch(/did you mean STUB_PROVIDER_MAX_LIST_ITEMS \(--max-list-items\)\?/);
    const bad = await runMain(['plan', '--id', ID], { env: cleanEnv({ STUB_PROVIDER_FORCE: 'maybe' }) });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/STUB_PROVIDER_FORCE="maybe": expected true or false/);
  });
});

describe('colour', () => {
  const run = async (s: Sim, extraArgs: string[], extraEnv: NodeJS.ProcessEnv) => {
    const env = { ...cleanEnv({ OMNI_SERVICE_ACCOUNT_KEY: s.keys[`infra-provider:${ID}`]! }), ...extraEnv };
    if (!('NO_COLOR' in extraEnv)) delete env.NO_COLOR;
    return runMain(['--id', ID, '--yes', '--omni-api-endpoint', s.endpoint, '--log-format', 'pretty', ...extraArgs], {
      env,
    });
  };

  it('pretty logs have colour with --color, none with NO_COLOR or --no-color (which beats env --color)', async () => {
    const s = await sim();
    const coloured = await run(s, ['--color'], {});
    expect(coloured.stderr).toContain(ESC);
    for (const [args, env] of [
      [[], { NO_COLOR: '1' }],
      [['--no-color'], {}],
      [['--no-color'], { STUB_PROVIDER_COLOR: 'true' }],
    ] as [string[], NodeJS.ProcessEnv][]) {
      const r = await run(s, args, env);
      expect(r.stderr.length, JSON.stringify([args, env])).toBeGreaterThan(0);
      expect(r.stderr, JSON.stringify([args, env])).not.toContain(ESC);
    }
  });
});
