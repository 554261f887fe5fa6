// `stub-provider demo`: the whole flow against the embedded simulated Omni, in this process, narrated
// (src/commands/demo/flow.ts). `--keep` leaves the simulated Omni up afterwards for poking at until Ctrl-C.

import { DEFAULT_DEMO_OMNI_VERSION } from './scenario.js';
import { StubError, UsageError } from '../../exit-codes.js';
import { inertJson } from '../../omni-api/untrusted.js';
import { parseVersion, VersionError } from '../../omni-sim/version.js';
import { defineCommand, once } from '../options.js';
import type { CliContext, Flags, Given, OptionTable } from '../options.js';
import { colorOption, OUTPUT_FORMATS } from '../provider-options.js';
import type { OutputFormat } from '../provider-options.js';
import { untilSignal } from '../sim.js';
import { terminalWidth } from '../run-io.js';

export const demoOptions = {
  'omni-version': {
    type: 'string',
    default: DEFAULT_DEMO_OMNI_VERSION,
    describe: 'Omni version the simulated Omni behaves like (e.g. 1.3.4, 1.4.2)',
  },
  output: {
    type: 'string',
    alias: 'o',
    choices: OUTPUT_FORMATS,
    default: 'text' as const,
    describe: 'text: narration; json or yaml: the steps, their reports and the checks',
  },
  keep: {
    type: 'boolean',
    default: false,
    describe: 'Afterwards keep the simulated Omni running and print its endpoint and keys, until Ctrl-C',
  },
  'log-level': {
    type: 'string',
    choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const,
    default: 'warn',
    describe: "Level of the stub's own logs (stderr)",
  },
} as const satisfies OptionTable;

/** What `demo` runs with: the command line parsed once (parseDemo). */
export interface DemoConfig {
  /** The Omni version the simulated Omni behaves like, checked, without a leading v. */
  omniVersion: string;
  output: OutputFormat;
  keep: boolean;
  logLevel: Flags<typeof demoOptions>['log-level'];
  color?: boolean;
}

/** `demo`'s command line as yargs parsed it, checked. */
export function parseDemo(given: Given<typeof demoOptions>, env: NodeJS.ProcessEnv): DemoConfig {
  const a = once(demoOptions, given);
  try {
    parseVersion(a['omni-version']);
  } catch (e) {
    if (e instanceof VersionError)
      throw new UsageError(`--omni-version ${JSON.stringify(a['omni-version'])}: ${e.message}`);
    throw e;
  }
  return {
    omniVersion: a['omni-version'].trim().replace(/^v/, ''),
    output: a.output,
    keep: a.keep,
    logLevel: a['log-level'],
    ...colorOption(a, env),
  };
}

export const demoCommand = defineCommand({
  command: 'demo',
  describe:
    'Run the whole flow (plan, release, refuse, deregister) against an embedded simulated Omni, narrated; nothing ' +
    'leaves this machine',
  options: demoOptions,
  examples: [
    ['$0 demo', 'Watch a stuck machine being released and the provider deregistered (Omni 1.3.4 behaviour)'],
    [
      '$0 demo --omni-version 1.4.2 --keep',
      'The same with Omni 1.4 behaviour, then leave the simulated Omni running to try `stub-provider plan` against it',
    ],
  ],
  epilogue: 'Exit codes: 0 every check passed; 1 the demo did not show what it should (a bug); 2 usage.',
  parse: parseDemo,
  handler: (given, env, cli) => demo(parseDemo(given, env), cli),
});

async function demo(c: DemoConfig, cli: CliContext): Promise<void> {
  const json = c.output !== 'text';
  // Loaded here, not with every command: the demo brings the simulated Omni (see sim.ts loadSim).
  const { runDemo } = await import('./flow.js');
  const width = terminalWidth(process.stdout);
  const { result, sim } = await runDemo({
    omniVersion: c.omniVersion,
    cli,
    logLevel: c.logLevel,
    ...(c.color !== undefined ? { color: c.color } : {}),
    say: json
      ? () => undefined
      : (text) => {
          cli.stdout.write(`${text}\n`);
        },
    stderr: cli.stderr,
    signals: process,
    ...(width ? { width } : {}),
  });
  try {
    if (c.output === 'json') cli.stdout.write(`${inertJson(JSON.stringify(result, null, 2))}\n`);
    if (c.output === 'yaml') cli.stdout.write((await import('../yaml-output.js')).inertYaml(result));
    if (c.keep) {
      const signalled = untilSignal();
      const keys = Object.entries(sim.keys)
        .map(([name, key]) => `  ${name}:\n    OMNI_SERVICE_ACCOUNT_KEY=${key}`)
        .join('\n');
      cli.stderr.write(
        `\nThe simulated Omni stays up at ${sim.endpoint} until Ctrl-C. Its generated keys (demo only):\n${keys}\n` +
          (`For example: OMNI_ENDPOINT=${sim.endpoint} OMNI_SERVICE_ACCOUNT_KEY=<key above> stub-provider plan --id ` +
            `${Object.keys(sim.keys)[0]?.replace(/^infra-provider:/, '') ?? 'bare-metal'}\n`),
      );
      await signalled;
    }
  } finally {
    await sim.close();
  }
  if (!result.ok)
    throw new StubError(
      'STUB_DEMO_FAILED',
      1,
      `the demo did not show what it should: ${Object.entries(result.checks)
        .filter(([, v]) => !v)
        .map(([k]) => k)
        .join(', ')}`,
    );
}
