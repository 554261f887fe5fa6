// The simulated Omni, assembled: scenario -> store (seeded) -> access rules -> gateway on one
// loopback listener, with identities (generated key pairs where the scenario gives no public key),
// faults and Omni's own controllers for the scenario's Omni version.

import type { SimClock, StateApi } from './api.js';
import { createAccessApi } from './access/access.js';
import { SYS_VERSION_ID, sysVersionResource } from './behaviour.js';
import { type ControllerError } from './controllers/queue.js';
import { type OmniControllers, startOmniControllers } from './controllers/controllers.js';
import { createAuthenticate, IdentityRegistry } from './access/identities.js';
import { roleMissingIn } from './access/roles.js';
import type { FaultConfig } from './gateway/fault-config.js';
import { Faults } from './gateway/faults.js';
import { generateKey, type GeneratedKey } from './scenario/keys.js';
import { parseScenario, dumpScenario, type Scenario } from './scenario/scenario.js';
import { type Authenticator, Gateway } from './gateway/server.js';
import { listen } from './gateway/listen.js';
import { SimStore } from './store/store.js';
import type { Pointer, Resource } from '../omni-api/resource.js';
import { NS_EPHEMERAL, T } from '../omni-api/resource.js';

export interface SimContext {
  store: SimStore;
  registry: IdentityRegistry;
  clock: SimClock;
  omniVersion: string;
}

export interface SimOptions {
  /** Default 127.0.0.1 (loopback only). */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** PEM key + certificate: serve HTTPS. */
  tls?: { key: string; cert: string };
  /** Base clock in ms; faults add their offset on top. Default Date.now. */
  now?: () => number;
  /** Faults applied on top of the scenario's. */
  faults?: FaultConfig;
  /** Replaces signature verification (tests of the gateway alone). */
  authenticate?: Authenticator;
  /** Builds the StateApi the gateway serves. Default: Omni's access rules (access.ts) over the store. */
  access?: (ctx: SimContext) => StateApi;
  /** Omni's own controllers (controllers.ts) for the scenario's version; `false` runs none. Default true. */
  controllers?: boolean;
  /**
   * Told of an error inside the controllers (controllers.ts ControllerError); default: onControllerFailure's listeners.
   */
  onControllerError?: (err: ControllerError) => void;
  /** Lifetime of generated keys (seconds). Default 365 days. */
  keyLifetimeSeconds?: number;
}

export interface Sim {
  /** `http://127.0.0.1:PORT` (or https). */
  endpoint: string;
  /** OMNI_SERVICE_ACCOUNT_KEY values of the identities whose key pair the sim generated. */
  keys: Record<string, string>;
  /** The generated key pairs themselves (private keys: tests only, never logged). */
  generatedKeys: Record<string, GeneratedKey>;
  omniVersion: string;
  scenario: Scenario;
  store: SimStore;
  /** What the gateway serves (access rules over the store). */
  api: StateApi;
  registry: IdentityRegistry;
  /** Omni's controllers (undefined with `controllers: false`). */
  controllers: OmniControllers | undefined;
  faults: Faults;
  clock: SimClock;
  gateway: Gateway;
  close(): Promise<void>;
  /** The current state in the scenario format. */
  dump(): string;
}

export async function createSim(scenario: Scenario | string, opts: SimOptions = {}): Promise<Sim> {
  const sc = typeof scenario === 'string' ? parseScenario(scenario) : scenario;
  const baseNow = opts.now ?? (() => Date.now());
  const faults = new Faults({ now: baseNow }, { ...sc.faults, ...(opts.faults ?? {}) });
  const clock = faults.clock;
  const store = new SimStore({ clock, writeGate: (who, type, bytes) => faults.gateWrite(who, type, bytes) });
  const seeded = seedStore(store, sc, clock);
  const { registry, keys, generatedKeys } = await registerIdentities(sc, baseNow, opts.keyLifetimeSeconds);

  const ctx: SimContext = { store, registry, clock, omniVersion: sc.omniVersion };
  const api = opts.access ? opts.access(ctx) : createAccessApi(store, { version: sc.omniVersion });
  const controllers =
    opts.controllers === false
      ? undefined
      : startOmniControllers(store, {
          version: sc.omniVersion,
          clock,
          onServiceAccountDeleted: (id) => registry.removeProvider(id),
          ...(opts.onControllerError ? { onError: opts.onControllerError } : {}),
        });
  const authenticate: Authenticator = opts.authenticate ?? createAuthenticate(registry, clock);
  const gateway = new Gateway({
    state: api,
    authenticate,
    clock,
    omniVersion: sc.omniVersion,
    faults,
    resources: store.size,
  });
  faults.attach({
    restart: () => store.restart(),
    failWatches: (e) => store.failWatches(e),
    breakStreams: () => gateway.breakStreams(),
    bumpVersion: (p) => store.bumpVersion(p),
  });
  const listening = await listen(gateway, {
    ...(opts.host !== undefined ? { host: opts.host } : {}),
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    ...(opts.tls ? { tls: opts.tls } : {}),
  });

  let closed: Promise<void> | undefined;
  return {
    endpoint: listening.endpoint,
    keys,
    generatedKeys,
    omniVersion: sc.omniVersion,
    scenario: sc,
    store,
    api,
    registry,
    controllers,
    faults,
    clock,
    gateway,
    close: () =>
      (closed ??= (async () => {
        controllers?.stop();
        await listening.close();
      })()),
    // Without the SysVersion the sim made itself, so that a dump reloads as the same scenario.
    dump: () =>
      dumpScenario({ ...sc, resources: seeded ? store.all().filter((r) => !isSysVersion(r.metadata)) : store.all() }),
  };
}

/**
 * The scenario's resources, and the SysVersion Omni creates at start-up (the provider reads it to
 * learn the version) unless the scenario brings its own, for example to test a stub against an odd
 * version string. Returns the SysVersion the sim made, if it did.
 */
function seedStore(store: SimStore, sc: Scenario, clock: SimClock): Resource | undefined {
  store.seed(sc.resources);
  const seeded = sc.resources.some((r) => isSysVersion(r.metadata))
    ? undefined
    : sysVersionResource(sc.omniVersion, clock.now());
  if (seeded) store.seed([seeded]);
  return seeded;
}

/** The scenario's identities registered, each with its public keys or a key pair generated for it. */
async function registerIdentities(
  sc: Scenario,
  baseNow: () => number,
  keyLifetimeSeconds: number | undefined,
): Promise<{ registry: IdentityRegistry; keys: Record<string, string>; generatedKeys: Record<string, GeneratedKey> }> {
  const registry = new IdentityRegistry();
  const generatedKeys: Record<string, GeneratedKey> = {};
  const keys: Record<string, string> = {};
  for (const id of sc.identities) {
    const missing = roleMissingIn(id.role, sc.omniVersion);
    if (missing) throw new Error(`identity ${id.name}: ${missing}, not ${sc.omniVersion}`);
    let publicKeys = id.publicKeys;
    if (publicKeys.length === 0) {
      // Dated an hour back so that a negative clock-offset fault does not make the key "not yet valid".
      const k = await generateKey(id.name, {
        date: new Date(baseNow() - 3600_000),
        ...(keyLifetimeSeconds !== undefined ? { lifetimeSeconds: keyLifetimeSeconds } : {}),
      });
      generatedKeys[id.name] = k;
      keys[id.name] = k.serviceAccountKey;
      publicKeys = [k.armoredPublicKey];
    }
    await registry.add({ name: id.name, role: id.role, publicKeys });
  }
  return { registry, keys, generatedKeys };
}

function isSysVersion(p: Pointer): boolean {
  return p.namespace === NS_EPHEMERAL && p.type === T.SysVersion && p.id === SYS_VERSION_ID;
}
