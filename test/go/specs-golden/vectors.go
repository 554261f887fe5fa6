package main

import (
	"fmt"
	"math"
	"time"

	"github.com/siderolabs/omni/client/api/omni/specs"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The table: for every spec message stub-provider reads or writes (src/omni-client/specs/messages.ts),
// one value with every field set, and the cases where a codec is most likely to go wrong. String
// values differ between the fields of a message, so that a codec that swaps two field numbers reads
// the wrong value into each and cannot pass.
//
// From each full value the generator below derives: the empty message; each field set alone; the
// full value with unknown fields at every level of nesting (Omni compares specs byte for byte when a
// provider writes a read-only resource, so unknown fields must come back as they were read); and the
// message's field numbers sent with the wrong wire type (kept as unknown fields by proto rules).

type example struct {
	name string
	msg  proto.Message
}

type messageTable struct {
	full   proto.Message
	extras []example
}

// A timestamp with nanoseconds that no millisecond or microsecond rounding keeps.
var someTime = timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))

func tables() []messageTable {
	ipmi := func() *specs.InfraMachineBMCConfigSpec_IPMI {
		return &specs.InfraMachineBMCConfigSpec_IPMI{Address: "10.20.30.40", Port: 623, Username: "ipmi-admin", Password: "ipmi-s3cret"}
	}

	return []messageTable{
		{full: &specs.InfraProviderSpec{}},
		{full: &specs.MachineRegistrationSpec{}},
		{
			full: &specs.InfraProviderStatusSpec{
				Schema: `{"type":"object"}`, Name: "Bare Metal", Description: "Provisions bare metal machines", Icon: "PHN2Zz48L3N2Zz4=",
			},
			extras: []example{
				{"non-ASCII text, a leading byte-order mark, a NUL", &specs.InfraProviderStatusSpec{Name: "\ufeffBäre Métal ✓", Description: "マシン 🚀 a\x00b"}},
			},
		},
		{
			full: &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: someTime, Error: "BMC unreachable"},
			extras: []example{
				{"timestamp at the Unix epoch (present, all zero)", &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: &timestamppb.Timestamp{}}},
				{"timestamp with milliseconds", &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: &timestamppb.Timestamp{Seconds: 1767225600, Nanos: 123_000_000}}},
				{"timestamp with microseconds", &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: &timestamppb.Timestamp{Seconds: 1767225600, Nanos: 123_456_000}}},
				{"timestamp of Go's zero time", &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: timestamppb.New(time.Time{})}},
				{"latest timestamp", &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: &timestamppb.Timestamp{Seconds: 253402300799, Nanos: 999_999_999}}},
				{"timestamp before the epoch with nanoseconds", &specs.InfraProviderHealthStatusSpec{LastHeartbeatTimestamp: &timestamppb.Timestamp{Seconds: -1, Nanos: 500_000_000}}},
			},
		},
		{
			full: &specs.MachineRequestSpec{
				TalosVersion: "v1.10.3",
				Overlay:      &specs.Overlay{Name: "rpi_generic", Image: "siderolabs/sbc-raspberrypi"},
				Extensions:   []string{"siderolabs/iscsi-tools", "siderolabs/util-linux-tools"},
				KernelArgs:   []string{"console=ttyS0", "net.ifnames=0"},
				MetaValues:   []*specs.MetaValue{{Key: 10, Value: "meta-ten"}, {Key: 12, Value: "meta-twelve"}},
				ProviderData: "size: large\nzone: a\n",
				GrpcTunnel:   specs.GrpcTunnelMode_DISABLED,
			},
			extras: []example{
				{"present but empty nested message, empty list elements", &specs.MachineRequestSpec{
					Overlay: &specs.Overlay{}, Extensions: []string{"", "only-second"}, MetaValues: []*specs.MetaValue{{}, {Key: 0, Value: "key zero"}},
				}},
				{"largest meta key", &specs.MachineRequestSpec{MetaValues: []*specs.MetaValue{{Key: math.MaxUint32, Value: "max"}}}},
				{"enum number unknown to Omni 1.5", &specs.MachineRequestSpec{GrpcTunnel: specs.GrpcTunnelMode(7)}},
			},
		},
		{
			full: &specs.MachineRequestStatusSpec{Id: "7a2c7d8e-0f1a-4b2c-9d3e-4f5a6b7c8d9e", Stage: specs.MachineRequestStatusSpec_FAILED, Error: "provision failed", Status: "Running Step: \"validate\""},
			extras: []example{
				{"each stage: PROVISIONING", &specs.MachineRequestStatusSpec{Stage: specs.MachineRequestStatusSpec_PROVISIONING}},
				{"each stage: PROVISIONED", &specs.MachineRequestStatusSpec{Stage: specs.MachineRequestStatusSpec_PROVISIONED}},
				{"negative enum number", &specs.MachineRequestStatusSpec{Stage: specs.MachineRequestStatusSpec_Stage(-1)}},
			},
		},
		{
			full: &specs.MachineRequestSetSpec{
				ProviderId:   "kubevirt",
				MachineCount: 3,
				TalosVersion: "v1.9.5",
				Extensions:   []string{"siderolabs/qemu-guest-agent", "siderolabs/nvidia-open-gpu-kernel-modules"},
				KernelArgs:   []string{"talos.platform=metal", "ip=dhcp"},
				MetaValues:   []*specs.MetaValue{{Key: 1, Value: "first"}, {Key: 2, Value: "second"}},
				ProviderData: "cores: 4\n",
				GrpcTunnel:   specs.GrpcTunnelMode_ENABLED,
			},
			extras: []example{
				{"negative machine_count", &specs.MachineRequestSetSpec{MachineCount: -1}},
				{"largest machine_count", &specs.MachineRequestSetSpec{MachineCount: math.MaxInt32}},
				{"smallest machine_count", &specs.MachineRequestSetSpec{MachineCount: math.MinInt32}},
			},
		},
		{
			full: &specs.InfraMachineSpec{
				PreferredPowerState: specs.InfraMachineSpec_POWER_STATE_ON,
				AcceptanceStatus:    specs.InfraMachineConfigSpec_REJECTED,
				ClusterTalosVersion: "v1.10.1",
				Extensions:          []string{"siderolabs/intel-ucode", "siderolabs/i915"},
				WipeId:              "wipe-3f2a",
				ExtraKernelArgs:     "console=tty0 talos.dashboard.disabled=1",
				RequestedRebootId:   "reboot-77",
				Cordoned:            true,
				InstallEventId:      42,
				NodeUniqueToken:     "node-token-9c1b",
			},
			extras: []example{
				{"largest install_event_id", &specs.InfraMachineSpec{InstallEventId: math.MaxUint64}},
				{"install_event_id above 2^53", &specs.InfraMachineSpec{InstallEventId: 1<<53 + 1}},
				{"acceptance ACCEPTED", &specs.InfraMachineSpec{AcceptanceStatus: specs.InfraMachineConfigSpec_ACCEPTED}},
			},
		},
		{
			full: &specs.InfraMachineStatusSpec{
				PowerState:           specs.InfraMachineStatusSpec_POWER_STATE_ON,
				ReadyToUse:           true,
				LastRebootId:         "reboot-76",
				LastRebootTimestamp:  someTime,
				Installed:            true,
				WipedNodeUniqueToken: "wiped-token-1d2e",
			},
			extras: []example{
				{"power state OFF", &specs.InfraMachineStatusSpec{PowerState: specs.InfraMachineStatusSpec_POWER_STATE_OFF}},
			},
		},
		{
			full: &specs.BMCConfigSpec{Config: &specs.InfraMachineBMCConfigSpec{Ipmi: ipmi(), Api: &specs.InfraMachineBMCConfigSpec_API{Address: "https://bmc-api.example:8443"}}},
			extras: []example{
				{"IPMI only", &specs.BMCConfigSpec{Config: &specs.InfraMachineBMCConfigSpec{Ipmi: ipmi()}}},
				{"largest IPMI port", &specs.BMCConfigSpec{Config: &specs.InfraMachineBMCConfigSpec{Ipmi: &specs.InfraMachineBMCConfigSpec_IPMI{Port: math.MaxUint32}}}},
				{"present but empty config", &specs.BMCConfigSpec{Config: &specs.InfraMachineBMCConfigSpec{}}},
			},
		},
		{full: &specs.InfraMachineBMCConfigSpec{Ipmi: ipmi(), Api: &specs.InfraMachineBMCConfigSpec_API{Address: "bmc-api.internal"}}},
		{full: ipmi()},
		{full: &specs.InfraMachineBMCConfigSpec_API{Address: "bmc-api.internal"}},
		{full: &specs.Overlay{Name: "rockpi4", Image: "siderolabs/sbc-rockchip"}},
		{full: &specs.MetaValue{Key: 11, Value: "meta-eleven"}},
		{
			full: &specs.ConfigPatchSpec{Data: "machine:\n  install:\n    disk: /dev/sda\n", CompressedData: []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xff, 0x80}},
			extras: []example{
				{"compressed only, bytes of every kind", &specs.ConfigPatchSpec{CompressedData: allBytes()}},
				{"large plain patch (multi-byte length)", &specs.ConfigPatchSpec{Data: largePatch()}},
			},
		},
		{
			full: &specs.ProviderJoinConfigSpec{
				Config:    &specs.JoinConfig{KernelArgs: []string{"siderolink.api=https://omni.example:8090?jointoken=abc", "talos.events.sink=[fdae::1]:8090"}, Config: "apiVersion: v1alpha1\nkind: SideroLinkConfig\n"},
				JoinToken: "join-token-5e6f",
			},
		},
		{full: &specs.JoinConfig{KernelArgs: []string{"talos.logging.kernel=tcp://[fdae::1]:8092", "console=ttyS1"}, Config: "kind: EventSinkConfig\n"}},
		{
			full: &specs.MachineSpec{ManagementAddress: "[fdae:41e4:649b:9303::1]:50000", Connected: true, UseGrpcTunnel: true},
		},
		{
			full: &specs.SysVersionSpec{BackendVersion: "1.5.0", InstanceName: "omni-lab", BackendApiVersion: 1},
			extras: []example{
				{"largest backend_api_version", &specs.SysVersionSpec{BackendApiVersion: math.MaxUint32}},
			},
		},
		{
			full: &specs.SiderolinkSpec{
				NodeSubnet: "fdae:41e4:649b:9303::/64", NodePublicKey: "wg-public-key=", LastEndpoint: "192.0.2.10:51820", Connected: true,
				VirtualAddrport: "[fdae::2]:50180", RemoteAddr: "198.51.100.7", NodeUniqueToken: "unique-token-aa",
			},
		},
		{
			full: &specs.SiderolinkAPIConfigSpec{
				MachineApiAdvertisedUrl: "https://omni.example:8090", WireguardAdvertisedEndpoint: "192.0.2.1:50180", EnforceGrpcTunnel: true, EventsPort: 8091, LogsPort: 8092,
			},
			extras: []example{
				{"negative ports (int32)", &specs.SiderolinkAPIConfigSpec{EventsPort: -1, LogsPort: math.MinInt32}},
			},
		},
		{
			full: &specs.ConnectionParamsSpec{
				Args: "siderolink.api=https://omni.example:8090", ApiEndpoint: "https://omni.example:8090", WireguardEndpoint: "192.0.2.1:50180",
				JoinToken: "legacy-join-token", UseGrpcTunnel: true, EventsPort: 8091, LogsPort: 8092,
			},
			extras: []example{
				{"largest ports (int32)", &specs.ConnectionParamsSpec{EventsPort: math.MaxInt32, LogsPort: 1}},
			},
		},
	}
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}

	return b
}

func largePatch() string {
	s := "machine:\n  files:\n"
	for len(s) < 3000 {
		s += "    - content: \"x\"\n"
	}

	return s
}

// allCases expands the tables into every case, in a stable order.
func allCases() ([]example, error) {
	var out []example

	seen := map[protoreflect.FullName]bool{}

	for _, t := range tables() {
		md := t.full.ProtoReflect().Descriptor()
		if seen[md.FullName()] {
			return nil, fmt.Errorf("%s is in the table twice", md.FullName())
		}

		seen[md.FullName()] = true

		out = append(out, example{"empty", t.full.ProtoReflect().Type().New().Interface()})

		if md.Fields().Len() == 0 {
			out = append(out, example{"unknown fields kept", withUnknown(t.full)})

			continue
		}

		out = append(out, example{"every field set", t.full})

		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !t.full.ProtoReflect().Has(fd) {
				return nil, fmt.Errorf("%s: the full value leaves %s unset", md.FullName(), fd.Name())
			}

			only := t.full.ProtoReflect().Type().New()
			only.Set(fd, t.full.ProtoReflect().Get(fd))
			out = append(out, example{fmt.Sprintf("only %s (field %d)", fd.Name(), fd.Number()), only.Interface()})
		}

		out = append(out, t.extras...)
		out = append(out,
			example{"unknown fields kept, at every level", withUnknown(t.full)},
			example{"known field numbers with the wrong wire type (kept as unknown)", wrongWireTypes(t.full)},
		)
	}

	return out, nil
}

// unknownFields are fields no spec message has: each wire type a proto3 writer may use, small and
// large field numbers (one- and five-byte tags), and an empty length-delimited one.
func unknownFields() []byte {
	var b []byte

	b = protowire.AppendTag(b, 15, protowire.VarintType)
	b = protowire.AppendVarint(b, 300)
	b = protowire.AppendTag(b, 16, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("kept as read"))
	b = protowire.AppendTag(b, 1000, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 0xdeadbeef)
	b = protowire.AppendTag(b, protowire.MaxValidNumber, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 0x0102030405060708)
	b = protowire.AppendTag(b, 999, protowire.BytesType)
	b = protowire.AppendBytes(b, nil)

	return b
}

// withUnknown copies m and adds unknownFields to it and to every message set inside it, except
// google.protobuf types (Timestamp), whose own fields are all known.
func withUnknown(m proto.Message) proto.Message {
	c := proto.Clone(m)
	addUnknown(c.ProtoReflect())

	return c
}

func addUnknown(m protoreflect.Message) {
	m.SetUnknown(append(m.GetUnknown(), unknownFields()...))
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind || fd.Message().FullName().Parent() == "google.protobuf" {
			return true
		}

		if fd.IsList() {
			for i := range v.List().Len() {
				addUnknown(v.List().Get(i).Message())
			}
		} else {
			addUnknown(v.Message())
		}

		return true
	})
}

// wrongWireTypes is an empty message of like's type whose unknown fields carry each of its field
// numbers with a wire type that does not match the field's type: a varint for a length-delimited
// field, a fixed32 for a varint field.
func wrongWireTypes(like proto.Message) proto.Message {
	md := like.ProtoReflect().Descriptor()

	var b []byte

	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)

		switch fd.Kind() {
		case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
			b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
			b = protowire.AppendVarint(b, 1)
		default:
			b = protowire.AppendTag(b, fd.Number(), protowire.Fixed32Type)
			b = protowire.AppendFixed32(b, 1)
		}
	}

	m := like.ProtoReflect().Type().New()
	m.SetUnknown(b)

	// Round-trip through the wire so that the message is what Go's own unmarshalling makes of those
	// bytes (every field unknown), not only what was set.
	wire, err := proto.Marshal(m.Interface())
	if err != nil {
		panic(err)
	}

	out := m.Type().New().Interface()
	if err := proto.Unmarshal(wire, out); err != nil {
		panic(err)
	}

	if hasAnyField(out) {
		panic(fmt.Sprintf("%s: a mismatched wire type was read as a known field", md.FullName()))
	}

	return out
}

func hasAnyField(m proto.Message) bool {
	found := false

	m.ProtoReflect().Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		found = true

		return false
	})

	return found
}

// rawCase is a byte string written by hand: one that no proto.Marshal writes but that every decoder
// must read the way the protobuf rules say (a field given twice, fields out of order), or, when not
// valid, one that every decoder must refuse (Go's reason goes into the vector).
type rawCase struct {
	name  string
	like  proto.Message
	wire  []byte
	valid bool
}

type field func([]byte) []byte

func str(no protowire.Number, s string) field {
	return func(b []byte) []byte {
		return protowire.AppendString(protowire.AppendTag(b, no, protowire.BytesType), s)
	}
}

func varint(no protowire.Number, v uint64) field {
	return func(b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, no, protowire.VarintType), v)
	}
}

func msg(no protowire.Number, fields ...field) field {
	return func(b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, no, protowire.BytesType), wire(fields...))
	}
}

func wire(fields ...field) []byte {
	var b []byte
	for _, f := range fields {
		b = f(b)
	}

	return b
}

func rawCases() []rawCase {
	return []rawCase{
		{"a message field given twice is merged", &specs.BMCConfigSpec{}, wire(
			msg(1, msg(1, str(1, "10.0.0.9"), varint(2, 623))),
			msg(1, msg(1, str(3, "merged-user"), str(4, "merged-password")), msg(2, str(1, "api.example"))),
		), true},
		{"a scalar field given twice: the last one counts", &specs.MachineRequestSpec{}, wire(
			str(1, "v1.8.0"), varint(7, 1), str(1, "v1.9.0"), varint(7, 2),
		), true},
		{"fields out of order, repeated fields interleaved, nested message merged", &specs.MachineRequestSpec{}, wire(
			str(4, "kernel-b"), str(3, "ext-a"), msg(2, str(2, "img")), str(4, "kernel-c"), str(3, "ext-b"), msg(2, str(1, "name")), str(1, "v1.7.0"),
		), true},
		{"a timestamp given twice is merged", &specs.InfraProviderHealthStatusSpec{}, wire(
			msg(1, varint(1, 1767225600)), str(2, "first"), msg(1, varint(2, 42)),
		), true},
		{"a non-canonical true (varint 2) and an over-long varint", &specs.InfraMachineSpec{}, wire(
			varint(8, 2),
			func(b []byte) []byte {
				return append(protowire.AppendTag(b, 9, protowire.VarintType), 0x85, 0x80, 0x80, 0x00)
			},
		), true},
		{"a list element that is an empty message", &specs.MachineRequestSetSpec{}, wire(msg(7), msg(7, varint(1, 5))), true},

		{"invalid UTF-8 in a string", &specs.MachineRequestStatusSpec{}, wire(str(3, "bad \xff\xfe")), false},
		{"invalid UTF-8 in a nested string", &specs.BMCConfigSpec{}, wire(msg(1, msg(1, str(3, "\xc3\x28")))), false},
		{"a length past the end", &specs.InfraProviderStatusSpec{}, append(protowire.AppendTag(nil, 2, protowire.BytesType), 10, 'x'), false},
		{"a varint cut short", &specs.InfraMachineSpec{}, append(protowire.AppendTag(nil, 9, protowire.VarintType), 0x80, 0x80), false},
		{"field number 0", &specs.SysVersionSpec{}, []byte{0x02, 0x00}, false},
		{"wire type 7", &specs.SysVersionSpec{}, []byte{0x0f, 0x00}, false},
		{"an end-group tag without a start", &specs.SysVersionSpec{}, protowire.AppendTag(nil, 5, protowire.EndGroupType), false},
	}
}
