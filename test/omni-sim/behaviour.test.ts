// What the sim does differently by Omni version at its gateway (src/omni-sim/behaviour.ts).

import { describe, expect, it } from 'vitest';
import { T } from '../../src/omni-api/resource.js';
import { encodeSpec } from '../../src/omni-api/specs/codec.js';
import { InfraMachineSpec, InfraProviderStatusSpec } from '../../src/omni-api/specs/messages.js';
import { gatewayBehaviour, renderYamlSpec } from '../../src/omni-sim/behaviour.js';
import { parseVersion } from '../../src/omni-sim/version.js';

const machine: InfraMachineSpec = {
  preferred_power_state: 1,
  acceptance_status: 0,
  cluster_talos_version: '',
  extensions: [],
  wipe_id: '',
  extra_kernel_args: '',
  requested_reboot_id: '',
  cordoned: false,
  install_event_id: 0n,
  node_unique_token: '',
  power_off_request_id: 'off-1',
};

describe('yaml_spec as the Omni version renders it', () => {
  it('leaves out fields the version does not have, even when the bytes carry them', () => {
    const bytes = encodeSpec(InfraMachineSpec, machine);
    const old = renderYamlSpec(T.InfraMachine, bytes, parseVersion('1.3.4'));
    expect(old).toBe(
      'preferredpowerstate: 1\nacceptancestatus: 0\nclustertalosversion: ""\nextensions: []\nwipeid: ' +
        '""\nextrakernelargs: ""\n' +
        'requestedrebootid: ""\ncordoned: false\ninstalleventid: 0\nnodeuniquetoken: ""\n',
    );
    expect(renderYamlSpec(T.InfraMachine, bytes, parseVersion('1.8.0'))).toBe(`${old}poweroffrequestid: off-1\n`);
  });

  it('renders an InfraProviderStatus without `version` before 1.10 (neither recording has it)', () => {
    const bytes = encodeSpec(InfraProviderStatusSpec, {
      schema: '',
      name: 'Recorded',
      description: '',
      icon: '',
      version: '',
    });
    const base = 'schema: ""\nname: Recorded\ndescription: ""\nicon: ""\n';
    expect(renderYamlSpec(T.InfraProviderStatus, bytes, parseVersion('1.9.3'))).toBe(base);
    expect(renderYamlSpec(T.InfraProviderStatus, bytes, parseVersion('1.10.0'))).toBe(`${base}version: ""\n`);
  });

  it('has no rendering for types without a schema', () => {
    expect(
      renderYamlSpec('MachineStatus.rec.infraprovider.example', new Uint8Array(), parseVersion('1.9.3')),
    ).toBeUndefined();
  });
});

describe('gateway behaviour by version', () => {
  it('serves Teardown from 1.8', () => {
    expect(gatewayBehaviour('1.7.3').teardownRoutes).toBe(false);
    expect(gatewayBehaviour('1.8.0').teardownRoutes).toBe(true);
  });

  it('panics on a Watch without options before 1.6.5', () => {
    expect(['1.3.4', '1.6.4', '1.6.5', '1.9.3'].map((v) => gatewayBehaviour(v).watchWithoutOptionsPanics)).toEqual([
      true,
      true,
      false,
      false,
    ]);
  });

  it("words protobuf-go's errors as the recorded builds did (1.9.3: a no-break space after proto:)", () => {
    expect(['1.3.4', '1.9.3', '1.10.0'].map((v) => gatewayBehaviour(v).protoErrorPrefix)).toEqual([
      'proto: ',
      'proto:\u00a0',
      'proto: ',
    ]);
  });

  it("reports Omni's backend API version 2 from 1.4.5", () => {
    expect(['1.3.4', '1.4.4', '1.4.5', '1.9.3'].map((v) => gatewayBehaviour(v).backendApiVersion)).toEqual([
      1, 1, 2, 2,
    ]);
  });
});
