// `stub-provider sim`: serve the simulated Omni from a scenario file until SIGTERM/SIGINT, then dump
// the final state. Prints one JSON line on stdout when ready, for scripts and tests to read:
//   {"endpoint":"http://127.0.0.1:PORT","keys":{"<identity>":"<OMNI_SERVICE_ACCOUNT_KEY>"}}
// (keys only for the identities whose key pair the sim generated; stdout is the result channel, so
// the keys go there and never to the logs). `--keys-dir` also writes them one file each, for a shell.

import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { takeEarlySignal } from '../early-signal.js';
import { UsageError } from '../exit-codes.js';
import { createLogger } from '../log.js';
import { defineCommand, nonEmpty, once } from './options.js';
import type { CliContext, Given, OptionTable } from './options.js';
import { colorOption } from './provider-options.js';
import { resolveScenarioFile, shippedScenarios } from './scenario-file.js';

export const simOptions = {
  scenario: {
    type: 'string',
    demandOption: true,
    describe:
      `Scenario YAML (the scenario shape, or \`omnictl get -o yaml\` documents), or the name of a shipped ` +
      `example (${shippedScenarios().join(', ')})`,
  },
  listen: {
    type: 'string',
    default: '127.0.0.1:0',
    describe: 'HOST:PORT to listen on (loopback unless told otherwise)',
  },
  dump: { type: 'string', describe: 'Write the final state here (scenario shape) on SIGTERM/SIGINT' },
  tls: { type: 'boolean', default: false, describe: 'Serve HTTPS with a freshly generated self-signed certificate' },
  'tls-ca-out': { type: 'string', describe: 'With --tls: write the certificate (the CA to trust) here' },
  faults: {
    type: 'string',
    describe:
      "Faults on top of the scenario's, as YAML or JSON with the keys of its `faults:` (docs/omni-behaviour.md, " +
      '"Faults the sim can add"), e.g. \'{throttle: {infra_provider: {bytes_per_second: 20000, burst: ' +
      "20000}}}' (Omni 1.9's write budget) or '{proxy_limit: {requests_per_second: 50, burst: 10, status: " +
      "429}}'",
  },
  'keys-dir': {
    type: 'string',
    describe:
      'Also write DIR/endpoint and each generated key to its own file, before the ready line: DIR/<provider-id>.key ' +
      "for infra-provider:<id>, DIR/<name>.key for each of the scenario's users (e.g. admin@example.org.key, an " +
      'Admin: not a key the stub can use); for OMNI_SERVICE_ACCOUNT_KEY=$(cat DIR/<id>.key) or ' +
      '--service-account-key-file',
  },
} as const satisfies OptionTable;

/** What `sim` serves, and how: the command line parsed once (parseSim). */
export interface SimConfig {
  /** `--scenario` as given (a file or a shipped example's name) and the file it names. */
  scenario: { value: string; file: string };
  listen: { host: string; port: number };
  dumpFile?: string;
  tls: boolean;
  tlsCaOut?: string;
  keysDir?: string;
  /** `--faults` as given (YAML or JSON), parsed with the scenario when the sim is loaded. */
  faults?: string;
  color?: boolean;
}

/** `sim`'s command line as yargs parsed it, checked. */
export function parseSim(given: Given<typeof simOptions>, env: NodeJS.ProcessEnv): SimConfig {
  const a = once(simOptions, given);
  if (a['tls-ca-out'] !== undefined && !a.tls) throw new UsageError('--tls-ca-out needs --tls');
  const listen = parseListen(a.listen);
  const dumpFile = nonEmpty(a.dump);
  const tlsCaOut = nonEmpty(a['tls-ca-out']);
  const keysDir = nonEmpty(a['keys-dir']);
  const faults = nonEmpty(a.faults);
  return {
    scenario: { value: a.scenario, file: resolveScenarioFile(a.scenario, '--scenario') },
    listen,
    ...(dumpFile ? { dumpFile } : {}),
    tls: a.tls,
    ...(tlsCaOut ? { tlsCaOut } : {}),
    ...(keysDir ? { keysDir } : {}),
    ...(faults ? { faults } : {}),
    ...colorOption(a, env),
  };
}

/** `HOST:PORT` or `[V6]:PORT`. */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535)
    throw new UsageError(`--listen ${JSON.stringify(text)}: expected HOST:PORT, e.g. 127.0.0.1:0`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Writes via a temporary file and a rename, so a reader never sees half a dump. */
async function writeAtomically(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, file);
}

/** The file name of an identity's key: `<id>.key` for `infra-provider:<id>`, else the name made safe for a file. */
export function keyFileName(identity: string): string {
  const base = identity.startsWith('infra-provider:') ? identity.slice('infra-provider:'.length) : identity;
  return `${base.replace(/[^A-Za-z0-9._@+-]/g, '_').replace(/^\./, '_')}.key`;
}

async function writeKeys(dir: string, endpoint: string, keys: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeAtomically(path.join(dir, 'endpoint'), `${endpoint}\n`);
  for (const [name, key] of Object.entries(keys)) await writeAtomically(path.join(dir, keyFileName(name)), key);
}

export function untilSignal(): Promise<NodeJS.Signals> {
  // One that came while the CLI loaded (early-signal.ts) ends it as soon as it is up.
  const early = takeEarlySignal();
  if (early) return Promise.resolve(early);
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      process.off('SIGTERM', on);
      process.off('SIGINT', on);
      resolve(sig);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}

export const simCommand = defineCommand({
  command: 'sim',
  describe: 'Serve a simulated Omni from a scenario file or a dump of your Omni (for tests and rehearsals)',
  options: simOptions,
  examples: [
    [
      '$0 sim --scenario bare-metal-stuck',
      'Serve the shipped example of a stuck bare-metal machine on a free loopback port; the first stdout line has ' +
        "the endpoint and the provider's key",
    ],
    [
      '$0 sim --scenario bare-metal-stuck --keys-dir ./sim',
      'The same, and write ./sim/endpoint and ./sim/bare-metal.key for another shell',
    ],
    [
      '$0 sim --scenario machine-request-stuck --listen 127.0.0.1:8099 --dump final.yaml',
      'Serve on a fixed port; on Ctrl-C or SIGTERM write the final state to final.yaml',
    ],
    [
      '$0 sim --scenario omni-dump.yaml',
      'Rehearse on a dump of your own Omni (`omnictl get ... -o yaml`, see the operator guide)',
    ],
    [
      '$0 sim --scenario bare-metal-stuck --tls --tls-ca-out ca.pem',
      'Serve HTTPS; pass ca.pem to stub-provider --ca-file',
    ],
  ],
  epilogue:
    'Then run stub-provider against it: OMNI_ENDPOINT=<endpoint> OMNI_SERVICE_ACCOUNT_KEY=<key> stub-provider plan ' +
    '--id <provider-id>. Exit codes: 0 stopped by a signal (state dumped); 2 usage or an invalid scenario.',
  parse: parseSim,
  handler: (given, env, cli) => serve(parseSim(given, env), cli),
});

/** `sim`: serves the scenario until SIGTERM or SIGINT, then writes the dump. */
async function serve(c: SimConfig, out: Pick<CliContext, 'stdout' | 'stderr'>): Promise<void> {
  // The simulated Omni is loaded only by the commands that serve it (see loadSim).
  const { createSim, loadScenarioFile, parseFaults, ScenarioError, generateSelfSignedCert, summarizeDump } =
    await loadSim();
  let scenario;
  let faults;
  try {
    scenario = await loadScenarioFile(c.scenario.file);
    faults = c.faults !== undefined ? parseFaults(c.faults, '--faults') : undefined;
  } catch (e) {
    if (e instanceof ScenarioError) throw new UsageError(e.message, { cause: e });
    throw e;
  }
  const log = createLogger({ destination: out.stderr, ...(c.color !== undefined ? { color: c.color } : {}) });
  // Nobody could log in to a sim without identities: a dump without its InfraProviders.
  if (scenario.identities.length === 0) {
    throw new UsageError(
      `--scenario ${c.scenario.value}: nobody could log in: the file has no \`identities:\` and no InfraProviders (a ` +
        `provider's key is made for each InfraProvider). ` +
        'For a dump of your Omni add `omnictl get infraproviders -o yaml` (the operator guide lists every command)',
    );
  }
  const identities = new Set(scenario.identities.map((i) => i.name));
  const keyless = summarizeDump(scenario).named.filter((id) => !identities.has(`infra-provider:${id}`));
  if (keyless.length > 0) {
    log.warn(
      { providers: keyless },
      `resources of provider(s) ${keyless.join(', ')} but no InfraProvider or identity for them: no key was made, ` +
        `and a run as them is refused as not registered. For a dump, add \`omnictl get infraproviders -o yaml\``,
    );
  }
  const tls = c.tls ? await generateSelfSignedCert() : undefined;
  if (tls && c.tlsCaOut) await writeAtomically(c.tlsCaOut, tls.cert);
  // Subscribe before announcing readiness: a signal right after the ready line must not kill us.
  const signalled = untilSignal();
  const sim = await createSim(scenario, {
    host: c.listen.host,
    port: c.listen.port,
    ...(tls ? { tls } : {}),
    ...(faults ? { faults } : {}),
    onControllerError: (f) => log.error({ task: f.task, err: f.cause }, f.message),
  });
  if (c.keysDir) await writeKeys(c.keysDir, sim.endpoint, sim.keys);
  log.info(
    { endpoint: sim.endpoint, omniVersion: sim.omniVersion, resources: scenario.resources.length },
    'simulated Omni ready',
  );
  out.stdout.write(`${JSON.stringify({ endpoint: sim.endpoint, keys: sim.keys })}\n`);
  const sig = await signalled;
  log.info({ signal: sig }, 'stopping the simulated Omni');
  await sim.close();
  if (c.dumpFile) await writeAtomically(c.dumpFile, sim.dump());
  log.flush();
}

/**
 * The simulated Omni (and the YAML, scenario and TLS code behind it), imported when a command needs
 * it: `run` and `plan` do not, and loading it with every command added ~16 MB to their resident memory.
 */
export async function loadSim() {
  const [index, scenario, tls, dump] = await Promise.all([
    import('../omni-sim/index.js'),
    import('../omni-sim/scenario/scenario.js'),
    import('../omni-sim/gateway/tls.js'),
    import('../omni-sim/scenario/dump-state.js'),
  ]);
  return {
    createSim: index.createSim,
    loadScenarioFile: scenario.loadScenarioFile,
    parseFaults: scenario.parseFaults,
    ScenarioError: scenario.ScenarioError,
    generateSelfSignedCert: tls.generateSelfSignedCert,
    summarizeDump: dump.summarizeDump,
  };
}
