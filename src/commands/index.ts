// Every command of the CLI, one module each. main.ts registers them in this order.

import type { CommandModule, Options } from 'yargs';
import type { AllFlags } from '../cli-args.js';
import { demoCommand, demoOptions } from './demo.js';
import { planCommand, planOptions } from './plan.js';
import { runCommand, runOptions } from './run.js';
import { simCommand, simOptions } from './sim.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const commands: CommandModule<any, any>[] = [runCommand, planCommand, simCommand, demoCommand];

/** Options every command has (cli.ts defines them on the top level). */
export const globalOptions = {
  color: { type: 'boolean', describe: 'Colour in the logs on a terminal (the default unless NO_COLOR is set); --no-color for none' },
} as const satisfies Record<string, Options>;

/** The flags of every command, for the environment binding and "did you mean" (cli-args.ts). */
export function allFlags(): AllFlags {
  const tables: Record<string, Record<string, Options>> = { run: runOptions, plan: planOptions, sim: simOptions, demo: demoOptions };
  const byCommand = Object.fromEntries(Object.entries(tables).map(([c, t]) => [c, Object.keys(t)]));
  const booleans = new Set([...Object.values(tables), globalOptions].flatMap((t) => Object.entries(t).filter(([, o]) => o.type === 'boolean').map(([k]) => k)));
  return { byCommand, booleans };
}
