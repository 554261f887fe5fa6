// A real pseudo-terminal for tests: a tmux server of the test's own (its socket in
// the test's folder, no user configuration), one session of a fixed size running a command, and
// what a person would see read back with capture-pane. Every wait polls a bounded number of times.

import { execFileSync, spawnSync } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';

const TMUX_CALL_MS = 10_000;

/** Why tmux cannot be used here, or undefined when it can. */
export function tmuxMissing(): string | undefined {
  const r = spawnSync('tmux', ['-V'], { encoding: 'utf8', timeout: TMUX_CALL_MS });
  if (r.error || r.status !== 0)
    return `tmux is not installed (${r.error?.message ?? r.stderr}): apt-get install -y tmux (.ci/run installs it)`;
  return undefined;
}

export class TmuxTerminal {
  private started = false;

  /** `socket`: a path in the test's own folder, so that no other tmux server is touched. */
  constructor(
    private readonly socket: string,
    private readonly session: string,
    private readonly size = { columns: 160, rows: 50 },
  ) {}

  private tmux(...args: string[]): string {
    return execFileSync('tmux', ['-S', this.socket, '-f', '/dev/null', ...args], {
      encoding: 'utf8',
      timeout: TMUX_CALL_MS,
    });
  }

  /** Starts `command` (run by tmux through sh) in a detached session of the fixed size. */
  start(command: string): void {
    this.tmux(
      'new-session',
      '-d',
      '-s',
      this.session,
      '-x',
      String(this.size.columns),
      '-y',
      String(this.size.rows),
      command,
    );
    this.started = true;
  }

  /** Keys as tmux names them (`Enter`, `y`). */
  send(...keys: string[]): void {
    this.tmux('send-keys', '-t', this.session, ...keys);
  }

  /**
   * The screen as a person sees it: the visible rows, or with `history` everything since the start
   * (wrapped lines joined); with `escapes` the colour and attribute sequences tmux holds for them.
   */
  capture(o: { history?: boolean; escapes?: boolean } = {}): string {
    return this.tmux(
      'capture-pane',
      '-p',
      '-J',
      ...(o.history ? ['-S', '-', '-E', '-'] : []),
      ...(o.escapes ? ['-e'] : []),
      '-t',
      this.session,
    );
  }

  /**
   * Polls the screen until `test` holds: at most `timeoutMs`, every `everyMs`; fails naming `what`, with the screen.
   */
  async waitFor(
    what: string,
    test: (screen: string) => boolean,
    o: { timeoutMs?: number; everyMs?: number; history?: boolean } = {},
  ): Promise<string> {
    const everyMs = o.everyMs ?? 100;
    const tries = Math.ceil((o.timeoutMs ?? 20_000) / everyMs);
    let screen = '';
    for (let i = 0; i < tries; i++) {
      screen = this.capture({ history: o.history ?? true });
      if (test(screen)) return screen;
      await delay(everyMs);
    }
    throw new Error(`the terminal never showed ${what} within ${o.timeoutMs ?? 20_000} ms; it shows:\n${screen}`);
  }

  /** Ends the server and everything running in it. */
  close(): void {
    if (!this.started) return;
    this.started = false;
    spawnSync('tmux', ['-S', this.socket, 'kill-server'], { timeout: TMUX_CALL_MS });
  }
}

/** The screen's rows without the empty ones at the bottom. */
export function rows(screen: string): string[] {
  const lines = screen.split('\n');
  while (lines.length > 0 && lines.at(-1)!.trim() === '') lines.pop();
  return lines;
}
