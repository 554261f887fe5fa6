// The command line checks of cli-args.ts one by one (main() runs them in test/cli-usage.test.ts),
// the TLS hints of exit-codes.ts, the YAML output, and the shipped scenarios by name.

import { realpathSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  applyEnvironment,
  checkWords,
  CliUsageError,
  closest,
  givenOnCommandLine,
  unknownFlagsMessage,
  unknownOnCommandLine,
  usageMessage,
} from '../src/cli-args.js';
import type { AllFlags, KnownOptions } from '../src/cli-args.js';
import { allFlags } from '../src/commands/index.js';
import { resolveScenarioFile, SCENARIOS_DIR, shippedScenarios } from '../src/commands/scenario-file.js';
import { keyFileName } from '../src/commands/sim.js';
import { inertYaml } from '../src/commands/yaml-output.js';
import { describeError, tlsHint } from '../src/exit-codes.js';
import { TransportError } from '../src/omni-client/errors.js';

const OPTIONS: KnownOptions = {
  key: {
    id: true,
    output: true,
    o: true,
    yes: true,
    y: true,
    wait: true,
    deregister: true,
    machine: true,
    concurrency: true,
    'log-level': true,
    logLevel: true,
  },
  boolean: ['yes', 'wait', 'deregister'],
  array: ['machine'],
  number: ['concurrency'],
  alias: { output: ['o'], yes: ['y'], 'log-level': ['logLevel'] },
};
const ALL: AllFlags = {
  byCommand: {
    run: ['id', 'output', 'yes', 'wait', 'deregister', 'machine', 'concurrency', 'log-level'],
    plan: ['id', 'from-dump', 'force'],
    sim: ['scenario'],
  },
  booleans: new Set(['yes', 'wait', 'deregister', 'force', 'color']),
};

describe('givenOnCommandLine', () => {
  it('knows every spelling of a flag: --x, --x=v, --no-x, camelCase, -o, -yo, and stops at --', () => {
    const given = givenOnCommandLine(
      ['--id', 'x', '--output=json', '--no-deregister', '--logLevel', 'debug', '-y', '--', '--wait'],
      OPTIONS,
    );
    expect([...given].sort()).toEqual(['deregister', 'id', 'log-level', 'output', 'yes']);
    expect([...givenOnCommandLine(['-yo', 'json'], OPTIONS)].sort()).toEqual(['output', 'yes']);
  });
});

describe('applyEnvironment', () => {
  const apply = (
    env: NodeJS.ProcessEnv,
    args: string[] = [],
    argv: Record<string, unknown> = { wait: false, deregister: true, output: 'text' },
  ) => {
    applyEnvironment(argv, OPTIONS, args, env, ALL);
    return argv;
  };

  it('sets what the command line did not give, converted by type, in both spellings', () => {
    expect(
      apply({
        STUB_PROVIDER_WAIT: 'yes',
        STUB_PROVIDER_CONCURRENCY: '8',
        STUB_PROVIDER_MACHINE: 'a,b',
        STUB_PROVIDER_LOG_LEVEL: 'debug',
      }),
    ).toMatchObject({ wait: true, concurrency: 8, machine: ['a,b'], 'log-level': 'debug', logLevel: 'debug' });
  });

  it('STUB_PROVIDER_NO_<FLAG> negates a yes/no flag; the command line wins', () => {
    expect(apply({ STUB_PROVIDER_NO_DEREGISTER: 'true' })).toMatchObject({ deregister: false });
    expect(apply({ STUB_PROVIDER_NO_DEREGISTER: '0' })).toMatchObject({ deregister: true });
    expect(apply({ STUB_PROVIDER_NO_DEREGISTER: 'true' }, ['--deregister'], { deregister: true })).toMatchObject({
      deregister: true,
    });
    expect(apply({ STUB_PROVIDER_OUTPUT: 'yaml' }, ['-o', 'json'], { output: 'json' })).toMatchObject({
      output: 'json',
    });
  });

  it("leaves another command's flag alone; refuses a non-flag variable, bad yes/no or number, value flag NO_", () => {
    expect(
      apply({ STUB_PROVIDER_FROM_DUMP: 'x', STUB_PROVIDER_NO_FORCE: '1', STUB_PROVIDER_SCENARIO: 'y' }),
    ).not.toHaveProperty('from-dump');
    expect(() => apply({ STUB_PROVIDER_FOO: '1' })).toThrow(CliUsageError);
    expect(() => apply({ STUB_PROVIDER_FOO: '1' })).toThrow(
      /environment variable STUB_PROVIDER_FOO matches no flag of stub-provider/,
    );
    expect(() => apply({ STUB_PROVIDER_MACHNE: '1' })).toThrow(/did you mean STUB_PROVIDER_MACHINE \(--machine\)\?/);
    expect(() => apply({ STUB_PROVIDER_HELP: '1' })).toThrow(/matches no flag/);
    expect(() => apply({ STUB_PROVIDER_WAIT: 'sometimes' })).toThrow(
      /STUB_PROVIDER_WAIT="sometimes": expected true or false/,
    );
    expect(() => apply({ STUB_PROVIDER_CONCURRENCY: 'eight' })).toThrow(
      /STUB_PROVIDER_CONCURRENCY="eight": expected a number/,
    );
    expect(() => apply({ STUB_PROVIDER_CONCURRENCY: '' })).toThrow(/expected a number/);
    expect(() => apply({ STUB_PROVIDER_NO_ID: 'x' })).toThrow(/matches no flag/);
  });

  it("the real commands' tables: every boolean flag has its NO_ form, globals included", () => {
    const all = allFlags();
    expect([...all.booleans]).toEqual(
      expect.arrayContaining([
        'deregister',
        'yes',
        'wait',
        'force',
        'insecure-skip-tls-verify',
        'color',
        'tls',
        'keep',
      ]),
    );
    expect(all.byCommand.plan).toContain('from-dump');
  });
});

describe('checkWords and unknownFlagsMessage', () => {
  const commands = ['run', 'plan', 'sim', 'demo', 'completion'];
  it('a stray word: the nearest command, or the flag its value belongs after', () => {
    expect(() => checkWords(['plna'], commands)).toThrow(/unknown command "plna": did you mean plan\?/);
    expect(() => checkWords(['smi'], commands)).toThrow(/did you mean sim\?/);
    expect(() => checkWords(['frobnicate'], commands)).toThrow(/unknown command "frobnicate" \(commands: run, plan/);
    expect(() => checkWords(['plan', 'x'], commands)).toThrow(/takes no argument "x"/);
    expect(() => checkWords(['plan'], commands)).not.toThrow();
    // completion's shell was taken out by yargs; a second word is refused as such.
    expect(() => checkWords(['completion', 'x'], commands, new Set(['completion']))).toThrow(
      /stub-provider completion takes one word, not also "x"/,
    );
    expect(() => checkWords([], commands)).not.toThrow();
  });

  it('one line per unknown flag, camelCase duplicates dropped', () => {
    expect(unknownFlagsMessage('Unknown arguments: machines, dry-run, dryRun', OPTIONS, 'run', ALL)).toBe(
      'unknown flag --machines: did you mean --machine?; --dry-run: there is no such flag; `stub-provider plan` ' +
        '(same --id and flags) is the dry run: it shows what a run would change and writes nothing',
    );
    expect(unknownFlagsMessage('Unknown argument: from-dump, fromDump', OPTIONS, 'run', ALL)).toBe(
      '--from-dump is a flag of `stub-provider plan`, not of `stub-provider run`',
    );
    expect(unknownFlagsMessage('Unknown argument: zzzzzz', OPTIONS, 'run', ALL)).toBe('unknown flag --zzzzzz');
    expect(unknownFlagsMessage('Missing required argument: id', OPTIONS, 'run', ALL)).toBeUndefined();
  });

  it('usageMessage: an unknown flag before a missing required one, invalid choices on one line', () => {
    const current = { command: 'run', options: OPTIONS };
    expect(usageMessage('Missing required argument: id', ['--idd', 'bare-metal'], current, ALL)).toBe(
      'unknown flag --idd: did you mean --id?',
    );
    expect(usageMessage('Missing required argument: id', ['--yes'], current, ALL)).toBe(
      'Missing required argument: id',
    );
    const invalid =
      'Invalid values:\n  Argument: output, Given: "jsn", Choices: "text", "json", "yaml"\n' +
      '  Argument: log-level, Given: "x y", Choices: "info", "debug"';
    expect(usageMessage(invalid, ['-o', 'jsn', '--log-level', 'x y'], current, ALL)).toBe(
      '--output "jsn": expected text, json or yaml; --log-level "x y": expected info or debug',
    );
    expect(usageMessage(invalid, ['--log-level', 'x y'], current, ALL)).toMatch(
      /^environment variable STUB_PROVIDER_OUTPUT="jsn": expected text, json or yaml; --log-level/,
    );
    expect(usageMessage('Not enough\n  arguments', [], current, ALL)).toBe('Not enough arguments');
  });

  it('unknownOnCommandLine: long and short flags that name no option, negations and values ignored', () => {
    expect(
      unknownOnCommandLine(['--idd', 'x', '--no-yes', '-y', '-q', '--output=json', '--', '--zz'], OPTIONS),
    ).toEqual(['idd', 'q']);
  });

  it('closest: a typo within a third of the word, never a wild guess', () => {
    expect(closest('plna', commands)).toBe('plan');
    expect(closest('machines', ['machine', 'wait'])).toBe('machine');
    expect(closest('x', ['yes'])).toBeUndefined();
    expect(closest('timeot', ['timeout', 'step-timeout'])).toBe('timeout');
  });
});

describe('TLS errors name the flag that fixes them', () => {
  const tls = (code: string) =>
    new TransportError('cannot reach Omni', {
      cause: Object.assign(new Error('x'), { cause: Object.assign(new Error(code), { code }) }),
    });
  it.each([
    ['DEPTH_ZERO_SELF_SIGNED_CERT', /--ca-file <the CA certificate, PEM>.*--insecure-skip-tls-verify/],
    ['SELF_SIGNED_CERT_IN_CHAIN', /--ca-file/],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', /not signed by a CA this machine trusts/],
    ['ERR_TLS_CERT_ALTNAME_INVALID', /does not name this host.*--ca-file cannot fix this.*--insecure-skip-tls-verify/],
    ['CERT_HAS_EXPIRED', /expired or not valid yet.*--insecure-skip-tls-verify/],
  ])('%s', (code, hint) => {
    expect(tlsHint(tls(code))).toMatch(hint);
    expect(describeError(tls(code))).toMatchObject({
      code: 'STUB_TRANSPORT',
      exitCode: 5,
      message: expect.stringMatching(hint),
    });
  });
  it('nothing for other errors', () => {
    expect(
      tlsHint(new TransportError('x', { cause: Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }) })),
    ).toBeUndefined();
    expect(describeError(new Error('boom'))).toEqual({ code: 'STUB_INTERNAL', message: 'boom', exitCode: 1 });
  });
});

describe('--output yaml', () => {
  it('the same value as the JSON, every control, bidi and separator character escaped inside double quotes', () => {
    const value = {
      id: 'req-\x1b[2J\u202eevil\u2028\n',
      ok: 'plain',
      n: 3,
      list: ['a\x85b', 'del\x7f'],
      'k\u202e': true,
    };
    const text = inertYaml(value);
    expect(parseYaml(text)).toEqual(value);
    // eslint-disable-next-line no-control-regex
    expect(text).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    expect(text.split('\n').filter((l) => l !== '')).toHaveLength(7);
  });
});

describe('shipped scenarios and key files', () => {
  it('a shipped example by its name, with or without .yaml, or as scenarios/<file>; a file of that name wins', () => {
    expect(shippedScenarios()).toEqual(expect.arrayContaining(['bare-metal-stuck', 'machine-request-stuck']));
    // (Here, in the repository, scenarios/ is also a folder of the current directory: the same files.)
    for (const v of ['bare-metal-stuck', 'bare-metal-stuck.yaml', 'scenarios/bare-metal-stuck.yaml'])
      expect(realpathSync(resolveScenarioFile(v, '--scenario'))).toBe(
        realpathSync(`${SCENARIOS_DIR}/bare-metal-stuck.yaml`),
      );
    expect(resolveScenarioFile('package.json', '--scenario')).toBe('package.json');
    expect(() => resolveScenarioFile('elsewhere/bare-metal-stuck', '--scenario')).toThrow(/no such file/);
    expect(() => resolveScenarioFile('docs', '--scenario')).toThrow(/is a folder/);
  });

  it('key files are named after the provider ID, other identities made safe for a file name', () => {
    expect(keyFileName('infra-provider:bare-metal')).toBe('bare-metal.key');
    expect(keyFileName('infra-provider:BareMetal-IAD1.x')).toBe('BareMetal-IAD1.x.key');
    expect(keyFileName('admin@example.org')).toBe('admin@example.org.key');
    expect(keyFileName('../x/y')).toBe('_._x_y.key');
  });
});
