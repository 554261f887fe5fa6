// `stub-provider demo`: the whole flow against the embedded simulated Omni, in this process, narrated
// (src/demo/flow.ts). `--keep` leaves the simulated Omni up afterwards for poking at until Ctrl-C.

import type { CommandModule } from 'yargs';
import { DEFAULT_DEMO_OMNI_VERSION } from '../demo/scenario.js';
import { StubError, UsageError } from '../exit-codes.js';
import { inertJson } from '../untrusted.js';
import { parseVersion, VersionError } from '../omni-sim/version.js';
import { colorOption, OUTPUT_FORMATS } from './provider-options.js';
import type { OutputFormat } from './provider-options.js';
import { untilSignal } from './sim.js';

interface DemoArgs {
  'omni-version': string;
  color?: boolean;
  output: OutputFormat;
  keep: boolean;
  'log-level': string;
}

export const demoOptions = {
  'omni-version': { type: 'string', default: DEFAULT_DEMO_OMNI_VERSION, describe: 'Omni version the simulated Omni behaves like (e.g. 1.3.4, 1.4.2)' },
  output: { type: 'string', alias: 'o', choices: OUTPUT_FORMATS, default: 'text' as const, describe: 'text: narration; json or yaml: the steps, their reports and the checks' },
  keep: { type: 'boolean', default: false, describe: 'Afterwards keep the simulated Omni running and print its endpoint and keys, until Ctrl-C' },
  'log-level': { type: 'string', choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const, default: 'warn', describe: 'Level of the stub\'s own logs (stderr)' },
} as const;

export const demoCommand: CommandModule<object, DemoArgs> = {
  command: 'demo',
  describe: 'Run the whole flow (plan, release, refuse, deregister) against an embedded simulated Omni, narrated; nothing leaves this machine',
  builder: (y) =>
    y
      .options(demoOptions)
      .check((a) => {
        try {
          parseVersion(a['omni-version']);
        } catch (e) {
          if (e instanceof VersionError) throw new UsageError(`--omni-version ${JSON.stringify(a['omni-version'])}: ${e.message}`);
          throw e;
        }
        return true;
      })
      .example('$0 demo', 'Watch a stuck machine being released and the provider deregistered (Omni 1.3.4 behaviour)')
      .example('$0 demo --omni-version 1.4.2 --keep', 'The same with Omni 1.4 behaviour, then leave the simulated Omni running to try `stub-provider plan` against it')
      .epilogue('Exit codes: 0 every check passed; 1 the demo did not show what it should (a bug); 2 usage.'),
  handler: async (args) => {
    const json = args.output !== 'text';
    // Loaded here, not with every command: the demo brings the simulated Omni (see sim.ts loadSim).
    const { runDemo } = await import('../demo/flow.js');
    const { result, sim } = await runDemo({
      omniVersion: args['omni-version'].trim().replace(/^v/, ''),
      logLevel: args['log-level'],
      ...colorOption(args, process.env),
      say: json ? () => undefined : (text) => { process.stdout.write(`${text}\n`); },
      stderr: process.stderr,
      signals: process,
    });
    try {
      if (args.output === 'json') process.stdout.write(`${inertJson(JSON.stringify(result, null, 2))}\n`);
      if (args.output === 'yaml') process.stdout.write((await import('./yaml-output.js')).inertYaml(result));
      if (args.keep) {
        const signalled = untilSignal();
        const keys = Object.entries(sim.keys).map(([name, key]) => `  ${name}:\n    OMNI_SERVICE_ACCOUNT_KEY=${key}`).join('\n');
        process.stderr.write(`\nThe simulated Omni stays up at ${sim.endpoint} until Ctrl-C. Its generated keys (demo only):\n${keys}\n` +
          `For example: OMNI_ENDPOINT=${sim.endpoint} OMNI_SERVICE_ACCOUNT_KEY=<key above> stub-provider plan --id ${Object.keys(sim.keys)[0]?.replace(/^infra-provider:/, '') ?? 'bare-metal'}\n`);
        await signalled;
      }
    } finally {
      await sim.close();
    }
    if (!result.ok) throw new StubError('STUB_DEMO_FAILED', 1, `the demo did not show what it should: ${Object.entries(result.checks).filter(([, v]) => !v).map(([k]) => k).join(', ')}`);
  },
};
