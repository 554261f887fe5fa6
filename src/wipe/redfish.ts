// `--wipe redfish-power-off` / `redfish-pxe-reboot`: the DMTF Redfish way to do what the bare-metal
// provider does to idle or removed machines: ComputerSystem.Reset ForceOff, or a one-time PXE boot
// override followed by a restart (the provider's RebootStatusController behaviour on removal).

import type { Logger } from 'pino';
import { RedfishClient, RedfishError } from './redfish-client.js';
import { startResult, type Clock } from './result.js';
import { Reason, type MachineFacts, type WipeResult, type WipeStrategy } from './types.js';

export type RedfishAction = 'power-off' | 'pxe-reboot';

export interface RedfishWipeOptions {
  action: RedfishAction;
  port: number;
  scheme: 'https' | 'http';
  insecureSkipTlsVerify: boolean;
}

export interface RedfishWipeDeps {
  logger: Logger;
  now?: Clock;
}

const SERVICE_ROOT = '/redfish/v1';
const DEFAULT_SYSTEMS = '/redfish/v1/Systems';
const DEFAULT_SESSIONS = '/redfish/v1/SessionService/Sessions';

interface ComputerSystem {
  PowerState?: string;
  Actions?: Record<string, { target?: string; 'ResetType@Redfish.AllowableValues'?: string[] } | undefined>;
}

export class RedfishWipe implements WipeStrategy {
  readonly name: string;

  constructor(
    private readonly opts: RedfishWipeOptions,
    private readonly deps: RedfishWipeDeps,
  ) {
    this.name = `redfish-${opts.action}`;
  }

  async wipe(m: MachineFacts, signal: AbortSignal): Promise<WipeResult> {
    const finish = startResult(this.name, m, this.deps.now);
    const bmc = m.bmc;
    if (!bmc?.address) return finish('skipped', Reason.noBmcData);
    const log = this.deps.logger.child({ machineId: m.machineId, wipe: this.name });
    const client = new RedfishClient({
      scheme: this.opts.scheme,
      host: bmc.address,
      port: this.opts.port,
      username: bmc.username,
      password: bmc.password,
      insecureSkipTlsVerify: this.opts.insecureSkipTlsVerify,
      signal,
      logger: log,
    });
    try {
      const reason = await this.run(client, log);
      return finish('succeeded', reason);
    } catch (err) {
      if (err instanceof RedfishError) return finish(err.outcome, err.message);
      throw err;
    } finally {
      await client.logout();
    }
  }

  private async run(client: RedfishClient, log: Logger): Promise<string> {
    // The service root is readable without credentials (DSP0266) and names the collections.
    const root = await client.tryGet(SERVICE_ROOT);
    const rootBody = (root.status === 200 && isObject(root.body) ? root.body : undefined) as
      | {
          Systems?: { '@odata.id'?: string };
          SessionService?: unknown;
          Links?: { Sessions?: { '@odata.id'?: string } };
        }
      | undefined;
    const auth = await client.login(sessionsPath(rootBody));
    log.debug({ auth }, 'Redfish authenticated');

    const systemsPath = rootBody?.Systems?.['@odata.id'] ?? DEFAULT_SYSTEMS;
    const members =
      ((await client.get(systemsPath)).body as { Members?: Array<{ '@odata.id'?: string }> } | undefined)?.Members ??
      [];
    const systemPath = members[0]?.['@odata.id'];
    if (!systemPath) throw new RedfishError('failed', `no ComputerSystem under ${systemsPath}`);
    if (members.length > 1)
      log.warn({ systems: members.length, using: systemPath }, 'the BMC manages several systems; using the first');

    const systemRes = await client.get(systemPath);
    const system = (systemRes.body ?? {}) as ComputerSystem;
    const reset = system.Actions?.['#ComputerSystem.Reset'];
    const target = reset?.target ?? `${systemPath}/Actions/ComputerSystem.Reset`;
    const allowed = reset?.['ResetType@Redfish.AllowableValues'];
    const isOff = system.PowerState === 'Off';

    if (this.opts.action === 'power-off') {
      if (isOff) return Reason.alreadyOff;
      const type = pickResetType(['ForceOff'], allowed);
      await client.send('POST', target, { ResetType: type });
      return `${type} accepted (PowerState was ${system.PowerState ?? 'unknown'})`;
    }

    // Some BMCs refuse a PATCH without the resource's ETag (If-Match); send it when there is one.
    const etag = systemRes.headers.etag;
    const ifMatch: Record<string, string> = typeof etag === 'string' ? { 'if-match': etag } : {};
    await client.send(
      'PATCH',
      systemPath,
      { Boot: { BootSourceOverrideTarget: 'Pxe', BootSourceOverrideEnabled: 'Once' } },
      ifMatch,
    );
    const type = isOff
      ? pickResetType(['On', 'ForceOn'], allowed)
      : pickResetType(['ForceRestart', 'PowerCycle'], allowed);
    await client.send('POST', target, { ResetType: type });
    return `one-time PXE boot set; ${type} accepted`;
  }
}

/**
 * Where to ask for a session: the service root's Links.Sessions (DSP0266 has it there whenever the
 * service has sessions), or the usual path when the root could not be read or names a SessionService
 * without the link. A root that names no sessions at all means basic auth (undefined): the password is
 * not posted to a URL the service never named (sushy-tools' emulator is such a service).
 */
function sessionsPath(
  root: { SessionService?: unknown; Links?: { Sessions?: { '@odata.id'?: string } } } | undefined,
): string | undefined {
  if (!root) return DEFAULT_SESSIONS;
  const linked = root.Links?.Sessions?.['@odata.id'];
  if (typeof linked === 'string' && linked !== '') return linked;
  return root.SessionService === undefined ? undefined : DEFAULT_SESSIONS;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The first preferred ResetType the system allows (all are allowed when it does not say). */
export function pickResetType(preferred: string[], allowed: string[] | undefined): string {
  if (!allowed || allowed.length === 0) return preferred[0]!;
  const t = preferred.find((p) => allowed.includes(p));
  if (!t)
    throw new RedfishError(
      'failed',
      `the system does not allow ResetType ${preferred.join(' or ')} (allowed: ${allowed.join(', ')})`,
    );
  return t;
}
