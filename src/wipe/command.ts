// `--wipe command`: runs the operator's program once per machine, without a shell, with a clean
// environment (PATH and the machine's facts, nothing else of ours: never the service account key).
// Exit status 0 is success. Its output goes to the log with the BMC password scrubbed.

import type { Logger } from 'pino';
import { splitCommand } from './argv.js';
import { runProcess } from './process.js';
import { abortedByTimeout, scrubSecrets, startResult, type Clock } from './result.js';
import { Reason, type MachineFacts, type WipeResult, type WipeStrategy } from './types.js';

export const FALLBACK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface CommandWipeDeps {
  logger: Logger;
  now?: Clock;
  /** PATH given to the program; the parent's PATH by default. */
  path?: string;
  killGraceMs?: number;
}

/** The whole environment of the program: PATH plus what is known of the machine. */
export function commandEnv(m: MachineFacts, path: string): Record<string, string> {
  const env: Record<string, string> = { PATH: path, STUB_MACHINE_ID: m.machineId, STUB_PROVIDER_ID: m.providerId };
  const b = m.bmc;
  if (b?.address) env.STUB_BMC_ADDRESS = b.address;
  if (b?.port) env.STUB_BMC_PORT = String(b.port);
  if (b?.username) env.STUB_BMC_USERNAME = b.username;
  if (b?.password) env.STUB_BMC_PASSWORD = b.password;
  return env;
}

export class CommandWipe implements WipeStrategy {
  readonly name = 'command';
  private readonly argv: string[];

  constructor(
    command: string,
    private readonly deps: CommandWipeDeps,
  ) {
    this.argv = splitCommand(command);
    if (this.argv.length === 0) throw new TypeError('the wipe command is empty');
  }

  async wipe(m: MachineFacts, signal: AbortSignal): Promise<WipeResult> {
    const finish = startResult(this.name, m, this.deps.now);
    const secrets = [m.bmc?.password];
    const [file, ...args] = this.argv as [string, ...string[]];
    const log = this.deps.logger.child({ machineId: m.machineId, wipe: this.name });
    log.debug({ program: file }, 'running the wipe command');
    const out = await runProcess({
      file,
      args,
      env: commandEnv(m, this.deps.path ?? process.env.PATH ?? FALLBACK_PATH),
      signal,
      killGraceMs: this.deps.killGraceMs ?? 2000,
      onLine: (stream, line) => log.info({ stream }, scrubSecrets(line, secrets)),
    });
    switch (out.kind) {
      case 'not-found':
        return finish('failed', `wipe command not found: ${file} (give a path, or a program on PATH)`);
      case 'spawn-error':
        return finish('failed', `wipe command could not start: ${out.message}`);
      case 'aborted': {
        if (!abortedByTimeout(signal))
          return finish('failed', `${Reason.interrupted}; wipe command killed (${out.killedWith})`);
        return finish('failed', `wipe command timed out; killed (${out.killedWith})`);
      }
      case 'exited': {
        if (out.exitCode === 0) return finish('succeeded');
        const how =
          out.exitCode === null ? `was killed by ${out.signal ?? 'a signal'}` : `exited with code ${out.exitCode}`;
        const last = lastLine(out.stderr) ?? lastLine(out.stdout);
        return finish('failed', `wipe command ${how}${last ? `: ${last}` : ''}`);
      }
    }
  }
}

function lastLine(text: string): string | undefined {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const l = lines[lines.length - 1];
  return l === undefined ? undefined : l.length > 200 ? `${l.slice(0, 200)}…` : l;
}
