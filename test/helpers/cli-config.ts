// The commands' code in this process, configured as the CLI configures it: a configuration comes
// from a command line and an environment through the CLI's own parser (src/cli.ts configFrom: the
// environment as flags, strict flags, every check of the command's parse), never from an object
// built by hand. Also the fixtures those tests share: a simulated Omni with providers registered,
// the environment and the Io of a command against it, a fake terminal.

import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { configFrom } from '../../src/cli.js';
import { executePlan } from '../../src/commands/plan.js';
import type { PlanConfig } from '../../src/commands/plan.js';
import type { Io } from '../../src/commands/provider-options.js';
import { executeRun } from '../../src/commands/run.js';
import type { RunConfig } from '../../src/commands/run.js';
import type { Result } from '../../src/commands/result.js';
import { NS_INFRA_PROVIDER, T } from '../../src/omni-api/resource.js';
import type { Resource } from '../../src/omni-api/resource.js';
import { createSim } from '../../src/omni-sim/index.js';
import type { Sim } from '../../src/omni-sim/index.js';
import { res } from './provider-fixtures.js';

/** `stub-provider [run] <args>` as the CLI would configure it in `env`. */
export function runConfigFrom(args: readonly string[], env: NodeJS.ProcessEnv = {}): RunConfig {
  return configFrom('run', args, env);
}

/** `stub-provider plan <args>` as the CLI would configure it in `env`. */
export function planConfigFrom(args: readonly string[], env: NodeJS.ProcessEnv = {}): PlanConfig {
  return configFrom('plan', args, env);
}

/** Where a test reaches a simulated Omni: the sim in this process, or a proxy in front of it (`endpoint`). */
export interface OmniAt {
  endpoint: string;
  keys: Record<string, string>;
}

/**
 * What the in-process command tests run with unless a test says otherwise, given as a Job gives
 * flags, in the environment, so that a flag on the test's command line wins: no prompt, the JSON
 * result, no logs, short waits.
 */
export const TEST_FLAGS: NodeJS.ProcessEnv = {
  STUB_PROVIDER_YES: 'true',
  STUB_PROVIDER_OUTPUT: 'json',
  STUB_PROVIDER_LOG_LEVEL: 'silent',
  STUB_PROVIDER_STEP_TIMEOUT: '5s',
  STUB_PROVIDER_TIMEOUT: '10s',
  STUB_PROVIDER_CONCURRENCY: '8',
};

/**
 * The environment of a command logged in to `omni` as provider `id`: the endpoint (`o.endpoint`, for
 * a proxy in front), that provider's key, STUB_PROVIDER_ID (`--id` on the command line wins, for a
 * test of an ID that is not the key's) and TEST_FLAGS.
 */
export function omniEnv(omni: OmniAt, id: string, o: { endpoint?: string } = {}): NodeJS.ProcessEnv {
  return {
    ...TEST_FLAGS,
    STUB_PROVIDER_ID: id,
    OMNI_ENDPOINT: o.endpoint ?? omni.endpoint,
    OMNI_SERVICE_ACCOUNT_KEY: omni.keys[`infra-provider:${id}`],
  };
}

export interface TestIoOptions {
  stdout?: NodeJS.WritableStream;
  stderr?: NodeJS.WritableStream;
  /** A person at a terminal who answers the confirmation prompt (stdin is a terminal then). */
  ask?: Io['ask'];
}

/**
 * The Io of a command in a test: stdout and stderr drained unless given, stdin not a terminal unless someone answers,
 * signals of its own.
 */
export function testIo(env: NodeJS.ProcessEnv, o: TestIoOptions = {}): Io {
  return {
    stdout: o.stdout ?? new PassThrough().resume(),
    stderr: o.stderr ?? new PassThrough().resume(),
    stdinIsTTY: o.ask !== undefined,
    ...(o.ask ? { ask: o.ask } : {}),
    env,
    signals: new EventEmitter(),
  };
}

export interface InOmni extends TestIoOptions {
  /** Talk to this endpoint (a proxy in front of the sim) instead of the sim's own. */
  endpoint?: string;
}

/** `stub-provider [run] <args>` in this process, logged in to `omni` as provider `id` (omniEnv): its result. */
export async function runIn(omni: OmniAt, id: string, args: readonly string[] = [], o: InOmni = {}): Promise<Result> {
  const env = omniEnv(omni, id, o);
  return executeRun(runConfigFrom(args, env), testIo(env, o));
}

/** `stub-provider plan <args>` in this process, logged in to `omni` as provider `id` (omniEnv): its result. */
export async function planIn(omni: OmniAt, id: string, args: readonly string[] = [], o: InOmni = {}): Promise<Result> {
  const env = omniEnv(omni, id, o);
  return executePlan(planConfigFrom(args, env), testIo(env, o));
}

/** Omni's registration of provider `id` (`omnictl infraprovider create`), with the finalizer Omni puts on it. */
export function registration(id: string): Resource {
  return res(NS_INFRA_PROVIDER, T.InfraProvider, id, { finalizers: ['InfraProviderCleanupController'] });
}

/** A provider's service account as the sim knows it (the sim makes its key). */
export const providerIdentity = (id: string) => ({
  name: `infra-provider:${id}`,
  role: 'InfraProvider' as const,
  publicKeys: [],
});

/**
 * A simulated Omni at `omniVersion` holding `resources`, with an account for each of `ids` and
 * (unless `registered: false`) its registration. Closed by `close()` (the caller's afterEach).
 */
export async function providerSim(
  omniVersion: string,
  resources: Resource[],
  o: { ids?: string[]; registered?: boolean; faults?: Record<string, unknown> } = {},
): Promise<Sim> {
  const ids = o.ids ?? ['bare-metal'];
  return createSim({
    omniVersion,
    identities: ids.map(providerIdentity),
    resources: [...(o.registered === false ? [] : ids.map(registration)), ...resources],
    faults: (o.faults ?? {}) as never,
  });
}

/** A stream that says it is a terminal `columns` wide, and keeps what was written to it. */
export function fakeTty(columns = 100): PassThrough & { isTTY: boolean; columns: number; text: () => string } {
  const s = new PassThrough() as PassThrough & { isTTY: boolean; columns: number; text: () => string };
  let out = '';
  s.on('data', (d: Buffer) => {
    out += d.toString();
  });
  Object.assign(s, { isTTY: true, columns, text: () => out });
  return s;
}
