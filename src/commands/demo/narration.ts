// The demo's means of telling its story (flow.ts tells it): numbered steps and checks as a person reads them,
// what Omni shows of one provider, and the stub's own commands run as that provider would run them (each
// command line parsed by the CLI's parser, with the sim's endpoint and the provider's key). Apart from the
// story so that flow.ts reads as the steps of the demo and nothing else.

import { Writable } from 'node:stream';
import type { CliContext } from '../options.js';
import { executePlan, planCommand } from '../plan.js';
import type { Io } from '../provider-options.js';
import { executeRun, runCommand } from '../run.js';
import type { Resource } from '../../omni-api/resource.js';
import { T, providerNamespace } from '../../omni-api/resource.js';
import type { Sim } from '../../omni-sim/index.js';
import type { Report } from '../../provider/report/report.js';
import { renderText } from '../../provider/report/text.js';

export interface DemoOptions {
  omniVersion: string;
  /** The CLI's parser: each step's configuration from its command line (commands/options.ts CliContext). */
  cli: CliContext;
  /** Log level of the stub's own logs (stderr). */
  logLevel: string;
  /** Colour in those logs (`--no-color`, NO_COLOR); absent: on a terminal. */
  color?: boolean;
  /** Receives the narration (text mode); nothing in JSON mode. */
  say: (text: string) => void;
  /** The terminal's columns, when the narration goes to one: the reports are wrapped to fit. */
  width?: number;
  stderr: NodeJS.WritableStream;
  /** Where SIGINT/SIGTERM reach the runs (the process in the CLI). */
  signals?: NodeJS.EventEmitter;
  now?: () => number;
}

export interface DemoStep {
  step: number;
  title: string;
  /** The equivalent command line, when the step is a stub-provider command. */
  command?: string;
  report?: Report;
}

const indent = (text: string, by = '    ') =>
  text
    .replace(/\n$/, '')
    .split('\n')
    .map((l) => (l === '' ? l : by + l))
    .join('\n');

export function find(sim: Sim, namespace: string, type: string, id: string): Resource | undefined {
  return sim.store.peek({ namespace, type, id });
}

function describeResource(r: Resource): string {
  const fins = r.metadata.finalizers.length ? ` [${r.metadata.finalizers.join(', ')}]` : '';
  return `${r.metadata.type.split('.')[0]}/${r.metadata.id} ${r.metadata.phase}${fins}`;
}

/** What a person would look at in the UI for one provider: its machines, requests, statuses and namespace. */
function providerView(sim: Sim, id: string): string[] {
  const mine = sim.store
    .all()
    .filter(
      (r) =>
        r.metadata.namespace === providerNamespace(id) ||
        (r.metadata.labels['omni.sidero.dev/infra-provider-id'] === id && r.metadata.type !== T.ConfigPatchRequest) ||
        (r.metadata.type === T.InfraProvider && r.metadata.id === id),
    );
  const order = [
    T.InfraProvider,
    T.InfraProviderStatus,
    T.InfraProviderHealthStatus,
    T.InfraMachine,
    T.InfraMachineStatus,
    T.MachineRequest,
    T.MachineRequestStatus,
    T.Machine,
  ];
  const rank = (r: Resource) => {
    const i = order.indexOf(r.metadata.type as never);
    return i < 0 ? order.length : i;
  };
  return mine
    .sort(
      (a, b) =>
        rank(a) - rank(b) ||
        a.metadata.type.localeCompare(b.metadata.type) ||
        a.metadata.id.localeCompare(b.metadata.id),
    )
    .map(describeResource);
}

/** One telling of the demo against one sim: its steps and checks so far. */
export class Narration {
  readonly steps: DemoStep[] = [];
  readonly checks: Record<string, boolean> = {};
  /** Each step is a command line, parsed as the CLI parses it; the demo's own logging flags on each. */
  readonly #logFlags: string[];

  constructor(
    readonly sim: Sim,
    private readonly o: DemoOptions,
  ) {
    this.#logFlags = [
      '--log-level',
      o.logLevel,
      ...(o.color !== undefined ? [o.color ? '--color' : '--no-color'] : []),
    ];
  }

  say(text: string): void {
    this.o.say(text);
  }

  /** A fact read back from the simulated Omni: kept under `name` and said with a tick or a cross. */
  check(name: string, ok: boolean, text: string): void {
    this.checks[name] = ok;
    this.say(`    ${ok ? '✔' : '✘'} ${text}`);
  }

  step(title: string, command?: string): DemoStep {
    const s: DemoStep = { step: this.steps.length + 1, title, ...(command ? { command } : {}) };
    this.steps.push(s);
    this.say(`\n== ${s.step}. ${title}`);
    if (command) this.say(`   $ ${command}`);
    return s;
  }

  /** What Omni holds of provider `id`, as a person would see it. */
  view(id: string): void {
    this.say(indent(providerView(this.sim, id).join('\n') || '(nothing left of this provider)'));
  }

  /** `stub-provider --id <id> --yes` as a step, once Omni's controllers have done what it set off; its report. */
  async run(title: string, id: string): Promise<Report> {
    const s = this.step(
      title,
      `OMNI_ENDPOINT=${this.sim.endpoint} OMNI_SERVICE_ACCOUNT_KEY=<${id}'s key> stub-provider --id ${id} --yes`,
    );
    const config = this.o.cli.configOf(
      runCommand,
      ['--id', id, '--yes', '--timeout', '60s', '--step-timeout', '20s', ...this.#logFlags],
      this.#env(id),
    );
    const rep = await executeRun(config, this.#io(id));
    await this.sim.controllers?.idle();
    this.#showReport(s, rep);
    return rep;
  }

  /** `stub-provider plan --id <id>` in the step `s`. */
  async plan(s: DemoStep, id: string): Promise<void> {
    const config = this.o.cli.configOf(planCommand, ['--id', id, ...this.#logFlags], this.#env(id));
    this.#showReport(s, await executePlan(config, this.#io(id)));
  }

  #showReport(s: DemoStep, rep: Report): void {
    s.report = rep;
    // Indented by four: wrapped at what is left of the terminal.
    this.say(indent(renderText(rep, this.o.width ? { width: this.o.width - 4 } : {})));
  }

  /** The environment of a command as provider `id`: the sim's endpoint and that provider's key. */
  #env(id: string): NodeJS.ProcessEnv {
    return { OMNI_ENDPOINT: this.sim.endpoint, OMNI_SERVICE_ACCOUNT_KEY: this.sim.keys[`infra-provider:${id}`] };
  }

  #io(id: string): Io {
    return {
      // The report comes back as a value; the demo prints it itself.
      stdout: new Writable({ write: (_chunk, _enc, done) => done() }),
      stderr: this.o.stderr,
      stdinIsTTY: false,
      env: this.#env(id),
      ...(this.o.signals ? { signals: this.o.signals } : {}),
    };
  }
}
