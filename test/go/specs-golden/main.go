// Command specs-golden is the Go side of stub-provider's golden tests for its spec codecs
// (docs/architecture.md, "Test peers"). It uses Omni's own generated spec messages
// (github.com/siderolabs/omni/client/api/omni/specs) and nothing of ours:
//
//	specs-golden vectors   prints the table of vectors.go as JSON: for every case the message's
//	                       protojson form (proto names) and its wire bytes as Omni marshals them
//	specs-golden filter    reads one JSON request per line on stdin and answers one JSON line each:
//	                         {"op":"decode","message":M,"proto_b64":B}  -> {"json":...,"unknown_b64":U,"proto_b64":B'}
//	                         {"op":"encode","message":M,"json":J}       -> {"proto_b64":B}
//	                         {"op":"equal","message":M,"a_b64":A,"b_b64":B} -> {"equal":bool}
//	                       a request that fails answers {"error":"..."} and the filter goes on.
//
// The TypeScript tests decode the vectors' bytes with stub-provider's codecs and compare with the
// JSON, then send what stub-provider encodes back through the filter, which says whether Omni's
// message types read the same message from it.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// Registers Omni's spec messages with the protobuf registry, where the filter finds them by name.
	_ "github.com/siderolabs/omni/client/api/omni/specs"
)

// The source of the vectors, as the shared vector files name theirs.
const source = "github.com/siderolabs/omni/client v1.5.0, package api/omni/specs, marshalled by google.golang.org/protobuf (proto.Marshal, deterministic)"

// Requests may carry large messages (a config patch); the limit keeps a broken writer from making
// the filter read without end.
const maxLine = 16 << 20

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: specs-golden vectors|filter")
		os.Exit(2)
	}

	var err error

	switch os.Args[1] {
	case "vectors":
		err = printVectors()
	case "filter":
		err = filter()
	default:
		err = fmt.Errorf("unknown command %q (want vectors or filter)", os.Args[1])
	}

	if err != nil {
		fmt.Fprintln(os.Stderr, "specs-golden:", err)
		os.Exit(1)
	}
}

type vectorOut struct {
	Message  string          `json:"message"`
	Case     string          `json:"case"`
	JSON     json.RawMessage `json:"json,omitempty"`
	ProtoB64 string          `json:"proto_b64"`
	// The unknown fields of the top-level message as Go keeps them.
	UnknownB64 string `json:"unknown_b64,omitempty"`
	// For bytes that proto.Marshal would not write (rawCases): what it writes for the message read.
	MarshalledB64 string `json:"marshalled_b64,omitempty"`
	// For bytes that Go refuses: its reason; a decoder must refuse them too.
	Invalid string `json:"invalid,omitempty"`
}

func printVectors() error {
	cases, err := allCases()
	if err != nil {
		return err
	}

	out := struct {
		Source  string      `json:"source"`
		Vectors []vectorOut `json:"vectors"`
	}{Source: source}

	for _, c := range cases {
		wire, err := marshal(c.msg)
		if err != nil {
			return fmt.Errorf("%s / %s: %w", c.msg.ProtoReflect().Descriptor().FullName(), c.name, err)
		}

		// Omni marshals specs with the vtprotobuf methods generated beside the messages where they
		// exist; a vector is only golden if both ways give the same bytes.
		if vt, ok := c.msg.(interface{ MarshalVT() ([]byte, error) }); ok {
			vtWire, err := vt.MarshalVT()
			if err != nil {
				return fmt.Errorf("%s / %s: MarshalVT: %w", c.msg.ProtoReflect().Descriptor().FullName(), c.name, err)
			}

			if !bytes.Equal(vtWire, wire) {
				return fmt.Errorf("%s / %s: MarshalVT and proto.Marshal disagree", c.msg.ProtoReflect().Descriptor().FullName(), c.name)
			}
		}

		js, err := toJSON(c.msg)
		if err != nil {
			return err
		}

		out.Vectors = append(out.Vectors, vectorOut{
			Message:    string(c.msg.ProtoReflect().Descriptor().FullName()),
			Case:       c.name,
			JSON:       js,
			ProtoB64:   base64.StdEncoding.EncodeToString(wire),
			UnknownB64: base64.StdEncoding.EncodeToString(c.msg.ProtoReflect().GetUnknown()),
		})
	}

	for _, c := range rawCases() {
		v, err := rawVector(c)
		if err != nil {
			return fmt.Errorf("%s / %s: %w", c.like.ProtoReflect().Descriptor().FullName(), c.name, err)
		}

		out.Vectors = append(out.Vectors, v)
	}

	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")

	return enc.Encode(out)
}

func rawVector(c rawCase) (vectorOut, error) {
	v := vectorOut{
		Message:  string(c.like.ProtoReflect().Descriptor().FullName()),
		Case:     c.name,
		ProtoB64: base64.StdEncoding.EncodeToString(c.wire),
	}

	m := c.like.ProtoReflect().Type().New().Interface()

	err := proto.Unmarshal(c.wire, m)
	if !c.valid {
		if err == nil {
			return v, fmt.Errorf("Go reads these bytes; the table says they are invalid")
		}

		v.Invalid = err.Error()

		return v, nil
	}

	if err != nil {
		return v, fmt.Errorf("Go refuses these bytes: %w", err)
	}

	if v.JSON, err = toJSON(m); err != nil {
		return v, err
	}

	marshalled, err := marshal(m)
	if err != nil {
		return v, err
	}

	v.MarshalledB64 = base64.StdEncoding.EncodeToString(marshalled)
	v.UnknownB64 = base64.StdEncoding.EncodeToString(m.ProtoReflect().GetUnknown())

	return v, nil
}

func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// toJSON is protojson with proto field names, made stable: protojson varies its whitespace on
// purpose, so it is compacted here.
func toJSON(m proto.Message) (json.RawMessage, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}

	return buf.Bytes(), nil
}

type request struct {
	Op       string          `json:"op"`
	Message  string          `json:"message"`
	ProtoB64 string          `json:"proto_b64"`
	JSON     json.RawMessage `json:"json"`
	AB64     string          `json:"a_b64"`
	BB64     string          `json:"b_b64"`
}

type reply struct {
	Error      string          `json:"error,omitempty"`
	JSON       json.RawMessage `json:"json,omitempty"`
	ProtoB64   *string         `json:"proto_b64,omitempty"`
	UnknownB64 *string         `json:"unknown_b64,omitempty"`
	Equal      *bool           `json:"equal,omitempty"`
}

func filter() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), maxLine)

	out := bufio.NewWriter(os.Stdout)
	defer out.Flush() //nolint:errcheck

	enc := json.NewEncoder(out)

	for in.Scan() {
		line := bytes.TrimSpace(in.Bytes())
		if len(line) == 0 {
			continue
		}

		var r reply

		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			r.Error = "not a JSON request: " + err.Error()
		} else if err := answer(req, &r); err != nil {
			r.Error = err.Error()
		}

		if err := enc.Encode(r); err != nil {
			return err
		}
	}

	return in.Err()
}

func answer(req request, r *reply) error {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(req.Message))
	if err != nil {
		return fmt.Errorf("message %q: %w", req.Message, err)
	}

	switch req.Op {
	case "decode":
		m, err := unmarshalB64(mt, req.ProtoB64)
		if err != nil {
			return err
		}

		if r.JSON, err = toJSON(m); err != nil {
			return err
		}

		wire, err := marshal(m)
		if err != nil {
			return err
		}

		p := base64.StdEncoding.EncodeToString(wire)
		u := base64.StdEncoding.EncodeToString(m.ProtoReflect().GetUnknown())
		r.ProtoB64, r.UnknownB64 = &p, &u

		return nil
	case "encode":
		m := mt.New().Interface()
		if err := protojson.Unmarshal(req.JSON, m); err != nil {
			return fmt.Errorf("protojson: %w", err)
		}

		wire, err := marshal(m)
		if err != nil {
			return err
		}

		p := base64.StdEncoding.EncodeToString(wire)
		r.ProtoB64 = &p

		return nil
	case "equal":
		a, err := unmarshalB64(mt, req.AB64)
		if err != nil {
			return fmt.Errorf("a: %w", err)
		}

		b, err := unmarshalB64(mt, req.BB64)
		if err != nil {
			return fmt.Errorf("b: %w", err)
		}

		eq := proto.Equal(a, b)
		r.Equal = &eq

		return nil
	default:
		return fmt.Errorf("unknown op %q (want decode, encode or equal)", req.Op)
	}
}

func unmarshalB64(mt protoreflect.MessageType, b64 string) (proto.Message, error) {
	wire, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}

	m := mt.New().Interface()
	if err := proto.Unmarshal(wire, m); err != nil {
		return nil, fmt.Errorf("unmarshal: %w", err)
	}

	return m, nil
}
