// Every command of the CLI, one module each (options.ts says what a command is). cli.ts registers
// them in this order.

import type { AllFlags } from '../cli-args.js';
import { demoCommand } from './demo/demo.js';
import type { Command, OptionTable } from './options.js';
import { globalOptions } from './options.js';
import { planCommand } from './plan.js';
import { runCommand } from './run.js';
import { simCommand } from './sim.js';

/** The commands by name; the configuration each one parses its command line into is ConfigOf<name>. */
export const COMMANDS = { run: runCommand, plan: planCommand, sim: simCommand, demo: demoCommand } as const;
export type CommandName = keyof typeof COMMANDS;
export type ConfigOf<K extends CommandName> = ReturnType<(typeof COMMANDS)[K]['parse']>;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyCommand = Command<OptionTable, any>;

export const commands: readonly AnyCommand[] = Object.values(COMMANDS) as readonly AnyCommand[];

/** The flags of every command, for the environment binding and "did you mean" (cli-args.ts). */
export function allFlags(): AllFlags {
  const byCommand = Object.fromEntries(Object.entries(COMMANDS).map(([c, cmd]) => [c, Object.keys(cmd.options)]));
  const tables: OptionTable[] = [...Object.values(COMMANDS).map((c) => c.options), globalOptions];
  const booleans = new Set(
    tables.flatMap((t) =>
      Object.entries(t)
        .filter(([, o]) => o.type === 'boolean')
        .map(([k]) => k),
    ),
  );
  return { byCommand, booleans };
}
