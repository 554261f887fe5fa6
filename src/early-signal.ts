// SIGINT and SIGTERM from the first line of the binary on (main.ts installs this before anything else
// loads): a signal that comes while the CLI is still loading, or between commands' handlers, is
// recorded instead of killing the process, so that the command still writes its result (design.md
// "Output": a result on every exit). The command that handles signals takes the record when it
// starts (process-io.ts trapSignals, sim's untilSignal); a process that would exit 0 without a command
// having taken it exits 130/143. Imports nothing and uses only syntax every Node parses (main.ts runs it first).

export type EarlySignal = 'SIGINT' | 'SIGTERM';

interface Record {
  signal: EarlySignal | undefined;
  taken: boolean;
  /** The command has ended: a signal now ends the process at once. */
  ended: boolean;
  installed: boolean;
}

const record: Record = { signal: undefined, taken: false, ended: false, installed: false };

/** 130 for SIGINT, 143 for SIGTERM. */
export function exitCodeOf(signal: EarlySignal): 130 | 143 {
  return signal === 'SIGINT' ? 130 : 143;
}

/**
 * Records the first SIGINT or SIGTERM. A second one while nothing else listens (a person pressing
 * Ctrl-C again while the CLI loads), or any once the command has ended, exits at once.
 */
export function installEarlySignals(p: NodeJS.Process): void {
  if (record.installed) return;
  record.installed = true;
  const on = (signal: EarlySignal) => {
    const alone = p.listenerCount(signal) === 1;
    if (record.ended || (alone && record.signal !== undefined)) p.exit(exitCodeOf(signal));
    if (record.signal === undefined) record.signal = signal;
    // A command's own handler got it too: it is that command's to act on.
    if (!alone) record.taken = true;
  };
  p.on('SIGINT', () => on('SIGINT'));
  p.on('SIGTERM', () => on('SIGTERM'));
  // Whatever ends the process (--help has no handler to take a signal): a signal no command took is not exit 0.
  p.on('exit', (code) => {
    if (code === 0 && !record.taken && record.signal !== undefined) p.exitCode = exitCodeOf(record.signal);
  });
}

/** The signal recorded before a command's own handler was there, if any; taking it makes it the command's. */
export function takeEarlySignal(): EarlySignal | undefined {
  if (record.taken || record.signal === undefined) return undefined;
  record.taken = true;
  return record.signal;
}

/** The command has returned: from now on a signal exits at once. */
export function endCommand(): void {
  record.ended = true;
}
