// `--wipe ipmi-power-off` / `ipmi-pxe-reboot`: chassis control through ipmitool. The password goes
// to ipmitool only through IPMI_PASSWORD with -E, never on the command line (where `ps` shows it).

import type { Logger } from 'pino';
import { FALLBACK_PATH } from './command.js';
import { runProcess, type ProcessOutcome } from './process.js';
import { abortedByTimeout, scrubSecrets, startResult, type Clock } from './result.js';
import { Reason, type MachineFacts, type WipeResult, type WipeStrategy } from './types.js';

export type IpmiAction = 'power-off' | 'pxe-reboot';

export interface IpmiWipeOptions {
  action: IpmiAction;
  interface: 'lanplus' | 'lan';
  /** Only used with lanplus (`-C`). */
  cipherSuite: number;
  ipmitoolPath?: string;
  /** ipmitool -N: seconds per attempt (ipmitool's own default when unset). */
  attemptTimeoutS?: number;
  /** ipmitool -R: attempts (ipmitool's own default when unset). */
  retries?: number;
}

export interface IpmiWipeDeps {
  logger: Logger;
  now?: Clock;
  /** PATH used to find ipmitool; the parent's PATH by default. */
  path?: string;
  killGraceMs?: number;
}

export const IPMITOOL_MISSING = 'ipmitool not found on PATH: install it (Debian: apt-get install ipmitool)';
const DEFAULT_IPMI_PORT = 623;

/** The ipmitool arguments before the command; exported so tests can check no password is in them. */
export function ipmitoolBaseArgs(
  m: MachineFacts,
  o: Pick<IpmiWipeOptions, 'interface' | 'cipherSuite' | 'attemptTimeoutS' | 'retries'>,
): string[] {
  const b = m.bmc ?? {};
  const args = ['-I', o.interface];
  if (o.interface === 'lanplus') args.push('-C', String(o.cipherSuite));
  args.push('-H', b.address ?? '', '-p', String(b.port || DEFAULT_IPMI_PORT));
  if (b.username) args.push('-U', b.username);
  if (b.password) args.push('-E');
  if (o.attemptTimeoutS !== undefined) args.push('-N', String(o.attemptTimeoutS));
  if (o.retries !== undefined) args.push('-R', String(o.retries));
  return args;
}

class IpmiStepError extends Error {
  constructor(
    readonly outcome: 'failed' | 'skipped',
    reason: string,
  ) {
    super(reason);
  }
}

export class IpmiWipe implements WipeStrategy {
  readonly name: string;

  constructor(
    private readonly opts: IpmiWipeOptions,
    private readonly deps: IpmiWipeDeps,
  ) {
    this.name = `ipmi-${opts.action}`;
  }

  async wipe(m: MachineFacts, signal: AbortSignal): Promise<WipeResult> {
    const finish = startResult(this.name, m, this.deps.now);
    if (!m.bmc?.address) return finish('skipped', Reason.noBmcData);
    const log = this.deps.logger.child({ machineId: m.machineId, wipe: this.name });
    const run = (...command: string[]) => this.ipmitool(m, command, signal, log);
    try {
      const on = parsePowerStatus(await run('chassis', 'power', 'status'));
      if (this.opts.action === 'power-off') {
        if (!on) return finish('succeeded', Reason.alreadyOff);
        await run('chassis', 'power', 'off');
        return finish('succeeded', 'chassis power off sent');
      }
      await run('chassis', 'bootdev', 'pxe');
      await run('chassis', 'power', on ? 'cycle' : 'on');
      return finish('succeeded', `PXE boot set; chassis power ${on ? 'cycle' : 'on'} sent`);
    } catch (err) {
      if (err instanceof IpmiStepError) return finish(err.outcome, err.message);
      throw err;
    }
  }

  private async ipmitool(m: MachineFacts, command: string[], signal: AbortSignal, log: Logger): Promise<string> {
    const password = m.bmc?.password;
    const env: Record<string, string> = { PATH: this.deps.path ?? process.env.PATH ?? FALLBACK_PATH };
    if (password) env.IPMI_PASSWORD = password;
    const file = this.opts.ipmitoolPath ?? 'ipmitool';
    log.debug({ command: command.join(' ') }, 'ipmitool');
    const out = await runProcess({
      file,
      args: [...ipmitoolBaseArgs(m, this.opts), ...command],
      env,
      signal,
      killGraceMs: this.deps.killGraceMs ?? 1000,
    });
    return checkOutcome(out, command, signal, file, password);
  }
}

/** What ipmitool prints when the BMC rejects the user or password (IPMI 1.5 and 2.0 sessions). */
const CREDENTIALS_REFUSED = /Activate Session command failed|RAKP \d|unauthorized name|invalid user ?name|password/i;

function checkOutcome(
  out: ProcessOutcome,
  command: string[],
  signal: AbortSignal,
  file: string,
  password?: string,
): string {
  switch (out.kind) {
    case 'not-found':
      throw new IpmiStepError(
        'failed',
        file === 'ipmitool'
          ? IPMITOOL_MISSING
          : `${file} not found: install ipmitool (Debian: apt-get install ipmitool)`,
      );
    case 'spawn-error':
      throw new IpmiStepError('failed', `ipmitool could not start: ${out.message}`);
    case 'aborted':
      // ipmitool may already have said why before it was killed.
      if (CREDENTIALS_REFUSED.test(out.stderr)) throw new IpmiStepError('failed', Reason.credentialsRefused);
      if (abortedByTimeout(signal)) throw new IpmiStepError('skipped', Reason.unreachable);
      throw new IpmiStepError('failed', Reason.interrupted);
    case 'exited': {
      if (out.exitCode === 0) return out.stdout;
      const text = scrubSecrets(`${out.stderr}\n${out.stdout}`, [password]);
      if (CREDENTIALS_REFUSED.test(text)) throw new IpmiStepError('failed', Reason.credentialsRefused);
      if (/Unable to establish|No response|timed out/i.test(text)) {
        throw new IpmiStepError('skipped', Reason.unreachable);
      }
      const last =
        text
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)
          .pop() ?? `exit code ${out.exitCode}`;
      throw new IpmiStepError('failed', `ipmitool ${command.join(' ')} failed: ${last.slice(0, 200)}`);
    }
  }
}

/** `Chassis Power is on|off` -> true when on. */
export function parsePowerStatus(stdout: string): boolean {
  const m = /Chassis Power is (on|off)/i.exec(stdout);
  if (!m)
    throw new IpmiStepError('failed', `unexpected answer to chassis power status: ${stdout.trim().slice(0, 120)}`);
  return m[1]!.toLowerCase() === 'on';
}
