// What every command's option table shares. A command is a table of yargs options and a parse: the
// types of what yargs makes of the command line come from the table (yargs' InferredOptionTypes), and
// the command's `parse` turns them, once, into its configuration (RunConfig, PlanConfig, SimConfig,
// DemoConfig) with every check yargs does not make; the command's code sees only that configuration.
// cli.ts builds the yargs commands from these descriptions (main, and configFrom for the demo and the
// tests: the same parser without running the command; the demo receives it as its CliContext).

import type { InferredOptionTypes, Options } from 'yargs';
import { UsageError } from '../exit-codes.js';

export type OptionTable = Record<string, Options>;

/** Options every command has (cli.ts defines them on the top level). */
export const globalOptions = {
  color: {
    type: 'boolean',
    describe: 'Colour in the logs on a terminal (the default unless NO_COLOR is set); --no-color for none',
  },
} as const satisfies OptionTable;

type WithGlobals<O extends OptionTable> = O & typeof globalOptions;

/** The values of table O (and the global options) with the types the table declares. */
export type Flags<O extends OptionTable> = InferredOptionTypes<WithGlobals<O>>;

/**
 * What yargs hands a command for table O: the declared types, except that a value flag given more
 * than once arrives as the array of its values (a yes/no flag given twice is the last one).
 * cli-args.ts's environment binding gives each flag a value of its declared type (or refuses it).
 */
export type Given<O extends OptionTable> = {
  [K in keyof WithGlobals<O>]: WithGlobals<O>[K] extends { type: 'boolean' } | { array: true }
    ? Flags<O>[K]
    : Flags<O>[K] | NonNullable<Flags<O>[K]>[];
};

/** A command as cli.ts registers it: its yargs description, its options, and what it does with them. */
export interface Command<O extends OptionTable, C> {
  /** yargs' command: the name, and `$0` for the default command. */
  command: string | readonly string[];
  describe: string;
  options: O;
  examples: readonly (readonly [string, string])[];
  epilogue: string;
  /**
   * The configuration from what yargs parsed: every check yargs does not make; a UsageError for a value that cannot be
   * used.
   */
  parse(given: Given<O>, env: NodeJS.ProcessEnv): C;
  /** Runs the command line: parses it (or has the result of every exit parse it, run-io.ts) and runs the command. */
  handler(given: Given<O>, env: NodeJS.ProcessEnv, cli: CliContext): Promise<void>;
}

/**
 * What cli.ts hands a command it runs: the CLI's own parser, for the one command that runs other
 * command lines (the demo, src/commands/demo/flow.ts). Handed at run time rather than imported: the parser is
 * built from every command, the demo's included.
 */
export interface CliContext {
  /** The configuration `stub-provider <command> <args>` would run with (cli.ts configFrom), without running it. */
  configOf<C>(command: Command<OptionTable, C>, args: readonly string[], env: NodeJS.ProcessEnv): C;
  /** Where the command writes its result and its logs (the process's, or a test's). */
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** A command, with its option and configuration types inferred from the description. */
export function defineCommand<O extends OptionTable, C>(c: Command<O, C>): Command<O, C> {
  return c;
}

/**
 * The values of `given` as table O declares them, each flag once: a value flag given more than once
 * is a usage error (which one was meant?), for every flag alike. The result holds the table's flags
 * (and the global ones) by their own names only.
 */
export function once<O extends OptionTable>(table: O, given: Given<O>): Flags<O> {
  const out: Record<string, unknown> = {};
  const g = given as Record<string, unknown>;
  for (const [flag, o] of Object.entries<Options>({ ...table, ...globalOptions })) {
    const v = g[flag];
    if (Array.isArray(v) && o.array !== true && o.type !== 'array') {
      throw new UsageError(`--${flag} is given ${v.length} times (${v.map(String).join(', ')}): give it once`);
    }
    if (v !== undefined) out[flag] = v;
  }
  return out as Flags<O>;
}

/** A string flag's value, or undefined when it is absent or empty (or, read before `once`, given twice). */
export function nonEmpty(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}
