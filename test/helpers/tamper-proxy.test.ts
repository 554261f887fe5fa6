// The tampering proxy of the hostile-server tests (test/helpers/tamper-proxy.ts) does what it says:
// passes an exchange through unchanged, rewrites answers line by line, answers by itself.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOmniClient, type OmniClient } from '../../src/omni-client/client.js';
import { T } from '../../src/omni-api/resource.js';
import { bareMetalMachine, machineUuid, providerRegistration } from '../../src/omni-sim/scenario/generate.js';
import { createSim, type Sim } from '../../src/omni-sim/index.js';
import { noDelay } from './fake-gateway.js';
import { startTamperProxy, type TamperProxy } from './tamper-proxy.js';

const ID = 'bare-metal';
let sim: Sim;
let proxy: TamperProxy;
let client: OmniClient;

beforeEach(async () => {
  sim = await createSim({
    omniVersion: '1.3.4',
    identities: [{ name: `infra-provider:${ID}`, role: 'InfraProvider', publicKeys: [] }],
    resources: [
      ...providerRegistration(ID, { static: true }),
      ...bareMetalMachine(ID, machineUuid(0)),
      ...bareMetalMachine(ID, machineUuid(1)),
    ],
    faults: {},
  });
  proxy = await startTamperProxy(sim.endpoint);
  // gzip asked on loopback too, so that the proxy is seen to pass compressed answers through.
  client = await createOmniClient({
    endpoint: proxy.endpoint,
    key: sim.keys[`infra-provider:${ID}`]!,
    delay: noDelay,
    env: {},
    retries: 0,
    gzip: 'streams',
  });
});
afterEach(async () => {
  await client.close();
  await proxy.close();
  await sim.close();
});

describe('tamper proxy', () => {
  it('passes exchanges through unchanged, gzip included, and records them', async () => {
    const direct = await createOmniClient({ endpoint: sim.endpoint, key: sim.keys[`infra-provider:${ID}`]!, env: {} });
    try {
      const viaProxy = await client.state.list('infra-provider', T.InfraMachine);
      const plain = await direct.state.list('infra-provider', T.InfraMachine);
      expect(viaProxy).toEqual(plain);
      expect(viaProxy).toHaveLength(2);
    } finally {
      await direct.close();
    }
    expect(proxy.seen.map((r) => r.rpc)).toEqual(['List']);
    expect(proxy.seen[0]!.headers['accept-encoding']).toBe('gzip');
  });

  it('rewrites the lines of an answer', async () => {
    proxy.setRule((r) => (r.rpc === 'List' ? { kind: 'lines', map: (line, i) => (i === 0 ? null : line) } : undefined));
    const rs = await client.state.list('infra-provider', T.InfraMachine);
    expect(rs.map((r) => r.metadata.id)).toEqual([machineUuid(1)].sort());
  });

  it('answers by itself', async () => {
    proxy.setRule(() => ({
      kind: 'respond',
      write: (res) => {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end('{"code":14,"message":"tampered"}');
      },
    }));
    await expect(
      client.state.get({ namespace: 'infra-provider', type: T.InfraMachine, id: machineUuid(0) }),
    ).rejects.toThrow(/tampered/);
    expect(sim.store.all().length).toBeGreaterThan(0);
  });
});
