import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  AcceptanceStatus,
  BMCConfigSpec,
  ConfigPatchSpec,
  ConnectionParamsSpec,
  InfraMachineSpec,
  InfraMachineStatusSpec,
  InfraProviderHealthStatusSpec,
  InfraProviderSpec,
  InfraProviderStatusSpec,
  MachineRegistrationSpec,
  MachineRequestSetSpec,
  MachineRequestSpec,
  MachineRequestStage,
  MachineRequestStatusSpec,
  MachineSpec,
  ProviderJoinConfigSpec,
  SiderolinkAPIConfigSpec,
  SiderolinkSpec,
  SysVersionSpec,
} from '../../../src/omni-api/specs/messages.js';
import {
  BareMetalMachineStatusSpec,
  BMCConfigurationSpec,
  PowerOperationSpec,
  RebootStatusSpec,
  TLSConfigSpec,
  WipeStatusSpec,
} from '../../../src/omni-api/specs/bare-metal.js';
import { decodeSpec, encodeSpec, updateSpec } from '../../../src/omni-api/specs/codec.js';
import { formatTimestamp, parseTimestamp } from '../../../src/omni-api/specs/timestamp.js';
import { specSchemaForType } from '../../../src/omni-api/specs/specs.js';
import { renderYamlSpec } from '../../../src/omni-sim/behaviour.js';
import { SpecError, type FieldSchema, type MessageSchema, type SpecValue } from '../../../src/omni-api/specs/schema.js';
import { specFromPlain, specToPlain } from '../../../src/omni-sim/scenario/plain.js';

type AnySchema = MessageSchema<unknown>;

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const b64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));

const ALL: Record<string, AnySchema> = {
  InfraProviderSpec,
  MachineRegistrationSpec,
  InfraProviderStatusSpec,
  InfraProviderHealthStatusSpec,
  MachineRequestSpec,
  MachineRequestStatusSpec,
  MachineRequestSetSpec,
  InfraMachineSpec,
  InfraMachineStatusSpec,
  BMCConfigSpec,
  ConfigPatchSpec,
  ProviderJoinConfigSpec,
  MachineSpec,
  SysVersionSpec,
  SiderolinkSpec,
  SiderolinkAPIConfigSpec,
  ConnectionParamsSpec,
  BMCConfigurationSpec,
  PowerOperationSpec,
  BareMetalMachineStatusSpec,
  WipeStatusSpec,
  RebootStatusSpec,
  TLSConfigSpec,
};

/** Appends one field of every wire type with numbers no schema here uses. */
function withUnknownFields(w: BinaryWriter): BinaryWriter {
  w.tag(1000, WireType.Varint).uint64(1n << 63n);
  w.tag(1001, WireType.Bit64).fixed64(0x0102030405060708n);
  w.tag(1002, WireType.LengthDelimited).bytes(new Uint8Array([0xff, 0x00, 0x80]));
  w.tag(1003, WireType.StartGroup).tag(1, WireType.Varint).int32(-1).tag(1003, WireType.EndGroup);
  w.tag(1004, WireType.Bit32).fixed32(0xdeadbeef);
  return w;
}

// ---------------------------------------------------------------------------------------------
// Arbitraries built from the tables, so a new table entry is covered without a new test.

const ts = fc
  .record({
    seconds: fc.bigInt(-62135596800n, 253402300799n),
    nanos: fc.oneof(
      fc.constant(0),
      fc.integer({ min: 0, max: 999 }).map((n) => n * 1_000_000),
      fc.integer({ min: 0, max: 999_999_999 }),
    ),
  })
  .map(formatTimestamp);
const text = fc.string({ unit: 'binary', maxLength: 12 });

function arbField(f: FieldSchema): fc.Arbitrary<unknown> {
  switch (f.kind) {
    case 'string':
      return text;
    case 'bool':
      return fc.boolean();
    case 'int32':
      return fc.integer({ min: -0x8000_0000, max: 0x7fff_ffff });
    case 'uint32':
      return fc.integer({ min: 0, max: 0xffff_ffff });
    case 'enum':
      return fc.oneof(fc.constantFrom(...Object.values(f.enum!.values)), fc.integer({ min: -5, max: 100 }));
    case 'uint64':
      return fc.bigInt(0n, (1n << 64n) - 1n);
    case 'bytes':
      return fc.uint8Array({ maxLength: 8 });
    case 'timestamp':
      return ts;
    case 'map':
      return fc.dictionary(text, text, { maxKeys: 3 });
    case 'message':
      return arbMessage(f.message!());
  }
}

function arbMessage(schema: AnySchema): fc.Arbitrary<SpecValue> {
  const rec: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of schema.fields) {
    if (f.repeated) rec[f.name] = fc.array(arbField(f), { maxLength: 3 });
    else if (f.kind === 'message' || f.kind === 'timestamp') rec[f.name] = fc.option(arbField(f), { nil: undefined });
    else rec[f.name] = arbField(f);
  }
  return fc.record(rec);
}

// ---------------------------------------------------------------------------------------------

describe('spec codecs: known encodings', () => {
  it('decodes CAIQAQ== as InfraMachineSpec preferred_power_state 2, acceptance_status ACCEPTED', () => {
    const bytes = b64('CAIQAQ==');
    expect(hex(bytes)).toBe('08021001');
    const { value, unknown } = decodeSpec(InfraMachineSpec, bytes);
    expect(value.preferred_power_state).toBe(2); // not a named value: proto3 enums are open, kept as read
    expect(value.acceptance_status).toBe(AcceptanceStatus.ACCEPTED);
    expect(value.cluster_talos_version).toBe('');
    expect(value.extensions).toEqual([]);
    expect(value.install_event_id).toBe(0n);
    expect(unknown).toEqual([]);
    expect(hex(encodeSpec(InfraMachineSpec, value))).toBe('08021001');
  });

  it('encodes a MachineRequestStatusSpec in field order with zero values left out', () => {
    const bytes = encodeSpec(MachineRequestStatusSpec, {
      id: 'm1',
      stage: MachineRequestStage.FAILED,
      error: 'x',
      status: '',
    });
    // 0a 02 "m1" | 10 03 | 1a 01 "x"
    expect(hex(bytes)).toBe('0a026d3110031a0178');
    expect(encodeSpec(MachineRequestStatusSpec, { id: '', stage: 0, error: '', status: '' })).toHaveLength(0);
  });

  it('writes uint64, uint32 and nested messages like Go does', () => {
    expect(
      hex(
        encodeSpec(InfraMachineSpec, {
          ...decodeSpec(InfraMachineSpec, new Uint8Array()).value,
          install_event_id: 300n,
          cordoned: true,
        }),
      ),
    ).toBe('4001' + '48ac02');
    const bmc = encodeSpec(BMCConfigSpec, {
      config: { ipmi: { address: '10.0.0.1', port: 623, username: '', password: '' } },
    });
    // 0a 0f | 0a 0d | 0a 08 "10.0.0.1" | 10 ef 04
    expect(hex(bmc)).toBe('0a0f0a0d0a0831302e302e302e3110ef04');
  });

  it("encodes timestamps as seconds+nanos and prints them like Omni's gateway", () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.Varint)
      .int64(1787306400n)
      .tag(2, WireType.Varint)
      .int32(123456000)
      .join();
    w.tag(2, WireType.LengthDelimited).string('boom');
    const expected = w.finish();
    const v = { last_heartbeat_timestamp: '2026-08-21T10:00:00.123456Z', error: 'boom' };
    expect(hex(encodeSpec(InfraProviderHealthStatusSpec, v))).toBe(hex(expected));
    expect(decodeSpec(InfraProviderHealthStatusSpec, expected).value).toEqual(v);
    // The epoch is present but empty; an absent timestamp is not written at all.
    expect(
      hex(encodeSpec(InfraProviderHealthStatusSpec, { last_heartbeat_timestamp: '1970-01-01T00:00:00Z', error: '' })),
    ).toBe('0a00');
    expect(decodeSpec(InfraProviderHealthStatusSpec, new Uint8Array([0x0a, 0x00])).value.last_heartbeat_timestamp).toBe(
      '1970-01-01T00:00:00Z',
    );
    expect(decodeSpec(InfraProviderHealthStatusSpec, new Uint8Array()).value.last_heartbeat_timestamp).toBeUndefined();
  });

  it('formats 0, 3, 6 or 9 fractional digits and parses offsets', () => {
    expect(formatTimestamp({ seconds: 0n, nanos: 0 })).toBe('1970-01-01T00:00:00Z');
    expect(formatTimestamp({ seconds: 0n, nanos: 500_000_000 })).toBe('1970-01-01T00:00:00.500Z');
    expect(formatTimestamp({ seconds: 0n, nanos: 1000 })).toBe('1970-01-01T00:00:00.000001Z');
    expect(formatTimestamp({ seconds: 0n, nanos: 1 })).toBe('1970-01-01T00:00:00.000000001Z');
    expect(formatTimestamp({ seconds: -62135596800n, nanos: 0 })).toBe('0001-01-01T00:00:00Z');
    expect(parseTimestamp('2026-08-21T12:00:00.5+02:00')).toEqual({ seconds: 1787306400n, nanos: 500_000_000 });
    expect(() => parseTimestamp('2026-02-30T00:00:00Z')).toThrow(SpecError);
    expect(() => parseTimestamp('yesterday')).toThrow(/RFC 3339/);
    expect(() => formatTimestamp({ seconds: 253402300800n, nanos: 0 })).toThrow(/out of range/);
  });

  it('keeps repeated strings and messages in order, empty strings included', () => {
    const v = {
      talos_version: 'v1.9.6',
      overlay: { name: 'rpi_generic', image: 'siderolabs/sbc-raspberrypi' },
      extensions: ['a', '', 'b'],
      kernel_args: [],
      meta_values: [
        { key: 10, value: 'x' },
        { key: 0, value: '' },
      ],
      provider_data: 'size: small\n',
      grpc_tunnel: 2,
    };
    const d = decodeSpec(MachineRequestSpec, encodeSpec(MachineRequestSpec, v));
    expect(d.value).toEqual(v);
  });

  it('merges a singular message field given twice, as protobuf (and Go) does', () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.LengthDelimited)
      .string('10.0.0.9')
      .join()
      .join();
    w.tag(1, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.LengthDelimited)
      .fork()
      .tag(3, WireType.LengthDelimited)
      .string('root')
      .join()
      .join();
    expect(decodeSpec(BMCConfigSpec, w.finish()).value.config?.ipmi).toEqual({
      address: '10.0.0.9',
      port: 0,
      username: 'root',
      password: '',
    });
    // A timestamp too: the seconds of the first, the nanos of the second.
    const t = new BinaryWriter();
    t.tag(1, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int64(60n).join();
    t.tag(1, WireType.LengthDelimited).fork().tag(2, WireType.Varint).int32(5_000_000).join();
    expect(decodeSpec(InfraProviderHealthStatusSpec, t.finish()).value.last_heartbeat_timestamp).toBe(
      '1970-01-01T00:01:00.005Z',
    );
  });

  it('rejects malformed bytes and values of the wrong type with a typed error naming the field', () => {
    expect(() => decodeSpec(InfraProviderStatusSpec, new Uint8Array([0x0a, 0x05, 0x61]))).toThrow(
      expect.objectContaining({
        code: 'STUB_SPEC_DECODE',
        message: expect.stringContaining('specs.InfraProviderStatusSpec'),
      }),
    );
    expect(() =>
      encodeSpec(MachineRequestStatusSpec, { id: 'a', stage: '3' as unknown as number, error: '', status: '' }),
    ).toThrow(
      expect.objectContaining({
        code: 'STUB_SPEC_INVALID',
        message: expect.stringContaining('specs.MachineRequestStatusSpec.stage'),
      }),
    );
    expect(() =>
      encodeSpec(BMCConfigSpec, { config: { ipmi: { address: '', port: -1, username: '', password: '' } } }),
    ).toThrow(/config\.ipmi\.port: expected a uint32/);
    expect(() => encodeSpec(InfraMachineSpec, { install_event_id: 1 } as never)).toThrow(
      /install_event_id: expected a uint64 bigint/,
    );
  });
});

describe('spec codecs: unknown fields', () => {
  it('survive decode -> encode byte for byte, every wire type, at the top level', () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).string('machine-1');
    w.tag(2, WireType.Varint).int32(MachineRequestStage.PROVISIONED);
    withUnknownFields(w);
    const bytes = w.finish();
    const { value, unknown } = decodeSpec(MachineRequestStatusSpec, bytes);
    expect(value).toEqual({ id: 'machine-1', stage: 2, error: '', status: '' });
    expect(unknown.map((u) => [u.no, u.wireType])).toEqual([
      [1000, WireType.Varint],
      [1001, WireType.Bit64],
      [1002, WireType.LengthDelimited],
      [1003, WireType.StartGroup],
      [1004, WireType.Bit32],
    ]);
    expect(hex(encodeSpec(MachineRequestStatusSpec, value))).toBe(hex(bytes));
    expect(hex(encodeSpec(MachineRequestStatusSpec, { ...value }, unknown))).toBe(hex(bytes));
  });

  it('survive in nested messages, and a known field with the wrong wire type is kept as unknown', () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).fork(); // ipmi
    w.tag(1, WireType.LengthDelimited).string('10.0.0.9');
    w.tag(9, WireType.LengthDelimited).string('new-ipmi-field');
    w.join();
    w.tag(2, WireType.LengthDelimited).fork(); // api
    w.tag(7, WireType.Varint).uint32(1);
    w.join();
    w.tag(3, WireType.LengthDelimited).string('manually_configured is a bool, not a string');
    const bytes = w.finish();
    const { value, unknown } = decodeSpec(BMCConfigurationSpec, bytes);
    expect(value.ipmi?.address).toBe('10.0.0.9');
    expect(value.manually_configured).toBe(false);
    expect(unknown.map((u) => u.no)).toEqual([3]);
    expect(value.api).toEqual({ address: '' });
    expect(hex(encodeSpec(BMCConfigurationSpec, value))).toBe(hex(bytes));
  });

  it('survive updateSpec: the provider changes a field and everything else is sent back as read', () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).string('req-1');
    w.tag(2, WireType.Varint).int32(MachineRequestStage.PROVISIONING);
    withUnknownFields(w);
    const before = w.finish();
    const after = updateSpec(MachineRequestStatusSpec, before, {
      stage: MachineRequestStage.FAILED,
      error: 'provider is gone',
    });
    const d = decodeSpec(MachineRequestStatusSpec, after);
    expect(d.value).toEqual({ id: 'req-1', stage: 3, error: 'provider is gone', status: '' });
    expect(hex(encodeSpec(MachineRequestStatusSpec, d.value))).toBe(hex(after));
    expect(d.unknown.map((u) => hex(u.data))).toEqual(
      decodeSpec(MachineRequestStatusSpec, before).unknown.map((u) => hex(u.data)),
    );
  });

  it('fast-check: every schema round-trips random values, and random bytes-with-unknowns byte for byte', () => {
    for (const [name, schema] of Object.entries(ALL)) {
      fc.assert(
        fc.property(arbMessage(schema), (v) => {
          const bytes = encodeSpec(schema, v);
          const d = decodeSpec(schema, bytes);
          expect(d.value, name).toEqual(v);
          expect(hex(encodeSpec(schema, d.value)), name).toBe(hex(bytes));
          const withUnknown = withUnknownFields(new BinaryWriter().raw(bytes)).finish();
          const d2 = decodeSpec(schema, withUnknown);
          expect(d2.value, name).toEqual(v);
          expect(d2.unknown).toHaveLength(5);
          expect(hex(encodeSpec(schema, d2.value)), name).toBe(hex(withUnknown));
        }),
        { numRuns: 60 },
      );
    }
  });
});

describe('spec codecs: plain objects for YAML', () => {
  it('accepts proto names and omnictl spellings, enum names, and fills zero values', () => {
    const fromProto = specFromPlain(InfraMachineSpec, {
      acceptance_status: 'ACCEPTED',
      cluster_talos_version: '1.9.6',
      install_event_id: '7',
      extensions: ['siderolabs/iscsi-tools'],
    });
    const fromOmnictl = specFromPlain(
      InfraMachineSpec,
      parse(
        'preferredpowerstate: 0\nacceptancestatus: 1\nclustertalosversion: 1.9.6\nextensions:\n    - ' +
          'siderolabs/iscsi-tools\nwipeid: ""\nextrakernelargs: ""\nrequestedrebootid: ""\ncordoned: ' +
          'false\ninstalleventid: 7\nnodeuniquetoken: ""\n',
      ),
    );
    expect(fromOmnictl).toEqual(fromProto);
    expect(fromProto).toMatchObject({
      acceptance_status: 1,
      preferred_power_state: 0,
      install_event_id: 7n,
      power_off_request_id: '',
      cordoned: false,
    });
  });

  it('reads nested maps and timestamps as RFC 3339, Date, or {seconds, nanos}', () => {
    const a = specFromPlain(BMCConfigurationSpec, {
      ipmi: { address: '10.0.0.1', port: 623, username: 'admin', password: 'p' },
      manuallyconfigured: true,
    });
    expect(a).toEqual({
      ipmi: { address: '10.0.0.1', port: 623, username: 'admin', password: 'p' },
      api: undefined,
      manually_configured: true,
    });
    const want = { last_reboot_id: 'r1', last_reboot_timestamp: '2026-03-01T10:00:00.250Z' };
    expect(
      specFromPlain(RebootStatusSpec, { lastrebootid: 'r1', lastreboottimestamp: '2026-03-01T11:00:00.25+01:00' }),
    ).toEqual(want);
    expect(
      specFromPlain(RebootStatusSpec, {
        last_reboot_id: 'r1',
        last_reboot_timestamp: new Date('2026-03-01T10:00:00.250Z'),
      }),
    ).toEqual(want);
    expect(
      specFromPlain(RebootStatusSpec, {
        last_reboot_id: 'r1',
        last_reboot_timestamp: { seconds: 1772359200, nanos: 250_000_000 },
      }),
    ).toEqual(want);
  });

  it('names the unknown key and the message, nested too', () => {
    expect(() => specFromPlain(InfraMachineSpec, { acceptancestatus: 1, acceptence_status: 1 })).toThrow(
      expect.objectContaining({
        code: 'STUB_SPEC_UNKNOWN_KEY',
        message: expect.stringMatching(/unknown key "acceptence_status" in specs\.InfraMachineSpec/),
      }),
    );
    expect(() => specFromPlain(BMCConfigSpec, { config: { ipmi: { adress: 'x' } } }, 'spec')).toThrow(
      /spec\.config\.ipmi: unknown key "adress" in specs\.InfraMachineBMCConfigSpec\.IPMI/,
    );
  });

  it('rejects a field given in both spellings, wrong types, unknown enum names', () => {
    expect(() => specFromPlain(InfraMachineSpec, { acceptancestatus: 1, acceptance_status: 1 })).toThrow(/given twice/);
    expect(() => specFromPlain(InfraMachineSpec, { clustertalosversion: 1.1 })).toThrow(
      /clustertalosversion: expected a string/,
    );
    expect(() => specFromPlain(InfraMachineSpec, { acceptancestatus: 'MAYBE' })).toThrow(
      /one of PENDING, ACCEPTED, REJECTED/,
    );
    expect(() => specFromPlain(BMCConfigSpec, { config: { ipmi: { port: 70000 * 70000 } } })).toThrow(
      /port: expected an uint32/,
    );
  });

  it('fast-check: plain forms of both styles read back to the same value', () => {
    for (const [name, schema] of Object.entries(ALL)) {
      fc.assert(
        fc.property(arbMessage(schema), (v) => {
          const value = decodeSpec(schema, encodeSpec(schema, v)).value;
          expect(specFromPlain(schema, specToPlain(schema, value, 'proto')), name).toEqual(value);
          expect(specFromPlain(schema, specToPlain(schema, value, 'omnictl')), name).toEqual(value);
          // Scenario readers must parse YAML with intAsBigInt: uint64 values above 2^53 do not fit a number.
          expect(specFromPlain(schema, parse(renderYamlFor(schema, value), { intAsBigInt: true })), name).toEqual(
            value,
          );
        }),
        { numRuns: 30 },
      );
    }
  });

  it('proto style leaves zero values out; omnictl style prints every field', () => {
    const v = decodeSpec(
      WipeStatusSpec,
      encodeSpec(WipeStatusSpec, {
        last_wipe_id: 'w',
        last_wipe_install_event_id: 12n,
        initial_wipe_done: false,
        wiped_node_unique_token: '',
      }),
    ).value;
    expect(specToPlain(WipeStatusSpec, v, 'proto')).toEqual({ last_wipe_id: 'w', last_wipe_install_event_id: '12' });
    expect(specToPlain(WipeStatusSpec, v, 'omnictl')).toEqual({
      lastwipeid: 'w',
      lastwipeinstalleventid: 12,
      initialwipedone: false,
      wipednodeuniquetoken: '',
    });
  });

  it('protojson style names enums (numbers unknown to us stay numbers)', () => {
    expect(
      specToPlain(
        MachineRequestStatusSpec,
        { id: '', stage: MachineRequestStage.FAILED, error: '', status: '' },
        'protojson',
      ),
    ).toEqual({ stage: 'FAILED' });
    expect(specToPlain(MachineRequestStatusSpec, { id: 'x', stage: 9, error: '', status: '' }, 'protojson')).toEqual({
      id: 'x',
      stage: 9,
    });
    expect(
      specToPlain(
        WipeStatusSpec,
        { last_wipe_id: '', last_wipe_install_event_id: 12n, initial_wipe_done: true, wiped_node_unique_token: '' },
        'protojson',
      ),
    ).toEqual({ last_wipe_install_event_id: '12', initial_wipe_done: true });
  });
});

function renderYamlFor(schema: AnySchema, value: unknown): string {
  const type = [...TYPES].find(([, s]) => s === schema)?.[0];
  if (type === undefined) throw new Error(`no type for ${schema.name}`);
  return renderYamlSpec(type, encodeSpec(schema, value))!;
}

const TYPES: [string, AnySchema][] = [
  'InfraProviders.omni.sidero.dev',
  'InfraProviderStatuses.omni.sidero.dev',
  'InfraProviderHealthStatuses.omni.sidero.dev',
  'MachineRequests.omni.sidero.dev',
  'MachineRequestStatuses.omni.sidero.dev',
  'MachineRequestSets.omni.sidero.dev',
  'InfraMachines.omni.sidero.dev',
  'InfraMachineStatuses.omni.sidero.dev',
  'InfraMachineRegistrations.omni.sidero.dev',
  'BMCConfigs.omni.sidero.dev',
  'ConfigPatchRequests.omni.sidero.dev',
  'ProviderJoinConfigs.omni.sidero.dev',
  'Links.omni.sidero.dev',
  'Machines.omni.sidero.dev',
  'SysVersions.system.sidero.dev',
  'SiderolinkAPIConfigs.omni.sidero.dev',
  'ConnectionParams.omni.sidero.dev',
  'BMCConfiguration.bare-metal.infraprovider.sidero.dev',
  'MachineStatus.bare-metal.infraprovider.sidero.dev',
  'PowerOperation.bare-metal.infraprovider.sidero.dev',
  'RebootStatus.bare-metal.infraprovider.sidero.dev',
  'TLSConfig.bare-metal.infraprovider.sidero.dev',
  'WipeStatus.bare-metal.infraprovider.sidero.dev',
].map((t) => [t, specSchemaForType(t)!]);

describe('spec registry', () => {
  it('maps every type we read or write to its schema, provider types by name whatever the ID', () => {
    const expected = [
      InfraProviderSpec,
      InfraProviderStatusSpec,
      InfraProviderHealthStatusSpec,
      MachineRequestSpec,
      MachineRequestStatusSpec,
      MachineRequestSetSpec,
      InfraMachineSpec,
      InfraMachineStatusSpec,
      MachineRegistrationSpec,
      BMCConfigSpec,
      ConfigPatchSpec,
      ProviderJoinConfigSpec,
      SiderolinkSpec,
      MachineSpec,
      SysVersionSpec,
      SiderolinkAPIConfigSpec,
      ConnectionParamsSpec,
      BMCConfigurationSpec,
      BareMetalMachineStatusSpec,
      PowerOperationSpec,
      RebootStatusSpec,
      TLSConfigSpec,
      WipeStatusSpec,
    ];
    expect(TYPES.map(([, s]) => s?.name)).toEqual(expected.map((s) => s.name));
    expect(specSchemaForType('BMCConfiguration.BareMetal-IAD1.infraprovider.sidero.dev')).toBe(BMCConfigurationSpec);
    expect(specSchemaForType('BMCConfiguration.infraprovider.sidero.dev')).toBeUndefined();
    expect(specSchemaForType('BMCConfiguration.bare-metal.omni.sidero.dev')).toBeUndefined();
    expect(specSchemaForType('Unknown.bare-metal.infraprovider.sidero.dev')).toBeUndefined();
    expect(specSchemaForType('ClusterMachines.omni.sidero.dev')).toBeUndefined();
  });

  it('renders yaml_spec the way omnictl prints it', () => {
    const bytes = encodeSpec(
      InfraMachineSpec,
      specFromPlain(InfraMachineSpec, {
        acceptance_status: 1,
        cluster_talos_version: '1.9.6',
        extensions: ['siderolabs/iscsi-tools'],
      }),
    );
    expect(renderYamlSpec('InfraMachines.omni.sidero.dev', bytes)).toBe(
      'preferredpowerstate: 0\nacceptancestatus: 1\nclustertalosversion: 1.9.6\nextensions:\n    - ' +
        'siderolabs/iscsi-tools\n' +
        ('wipeid: ""\nextrakernelargs: ""\nrequestedrebootid: ""\ncordoned: false\ninstalleventid: ' +
          '0\nnodeuniquetoken: ""\npoweroffrequestid: ""\n'),
    );
    expect(
      renderYamlSpec(
        'SysVersions.system.sidero.dev',
        encodeSpec(SysVersionSpec, { backend_version: '1.3.2', instance_name: '', backend_api_version: 0 }),
      ),
    ).toContain('backendversion: 1.3.2\n');
    expect(renderYamlSpec('ClusterMachines.omni.sidero.dev', new Uint8Array())).toBeUndefined();
  });
});
