// The process behind a command's Io: its stdin and stdout, the confirmation prompt on the terminal, and SIGINT and
// SIGTERM turned into an abort with the exit code that says which. Apart from the handler (run-io.ts) because
// these are the parts that touch the process itself, and tests hand in their own.

import { createInterface } from 'node:readline/promises';
import { ExitCode, StubError } from '../exit-codes.js';
import { takeEarlySignal } from '../early-signal.js';
import type { CliContext } from './options.js';
import type { Io } from './provider-options.js';

export function processIo(
  env: NodeJS.ProcessEnv = process.env,
  streams: Pick<CliContext, 'stdout' | 'stderr'> = process,
): Io {
  return {
    stdout: streams.stdout,
    stderr: streams.stderr,
    stdinIsTTY: process.stdin.isTTY === true,
    env,
    ask: (question) => askYesNo(process.stdin, streams.stderr, question),
    signals: process,
    takeEarlySignal,
  };
}

/**
 * Asks a yes/no question. On a terminal readline turns Ctrl-C into an AbortError (the process gets
 * no SIGINT): that is an interruption before anything was written, exit 130, not an internal error.
 */
export async function askYesNo(
  input: NodeJS.ReadableStream,
  output: NodeJS.WritableStream,
  question: string,
): Promise<boolean> {
  // terminal from the input: stdin decides whether Ctrl-C arrives as a key, whatever stderr is.
  const rl = createInterface({ input, output, terminal: (input as { isTTY?: boolean }).isTTY === true });
  try {
    const answer = await rl.question(question);
    return /^y(es)?$/i.test(answer.trim());
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ABORT_ERR') {
      throw new StubError(
        'STUB_INTERRUPTED',
        ExitCode.SigInt,
        'interrupted at the confirmation prompt; nothing was changed',
        { cause: err },
      );
    }
    throw err;
  } finally {
    rl.close();
  }
}

export interface Signals {
  signal: AbortSignal;
  code: () => 130 | 143 | undefined;
  release: () => void;
}

/** SIGINT/SIGTERM abort the run (also one that came while the CLI loaded); the exit code says which (130/143). */
export function trapSignals(io: Io): Signals {
  const ac = new AbortController();
  let code: 130 | 143 | undefined;
  const onInt = () => {
    code ??= ExitCode.SigInt;
    ac.abort(new StubError('STUB_INTERRUPTED', ExitCode.SigInt, 'interrupted (SIGINT)'));
  };
  const onTerm = () => {
    code ??= ExitCode.SigTerm;
    ac.abort(new StubError('STUB_INTERRUPTED', ExitCode.SigTerm, 'interrupted (SIGTERM)'));
  };
  io.signals?.on('SIGINT', onInt);
  io.signals?.on('SIGTERM', onTerm);
  const early = io.takeEarlySignal?.();
  if (early === 'SIGINT') onInt();
  else if (early === 'SIGTERM') onTerm();
  return {
    signal: ac.signal,
    code: () => code,
    release: () => {
      io.signals?.off('SIGINT', onInt);
      io.signals?.off('SIGTERM', onTerm);
    },
  };
}
