// The gateway client: cosi-project/runtime's `cosi.resource.State` client interface
// (v1alpha1.StateClient) spoken over an Omni-style /api gateway instead of native gRPC: every call is
// `POST /api/cosi.resource.State/<Method>` with the request as protojson, signed with go-api-signature
// as `Grpc-Metadata-*` headers (what grpc-gateway turns into the metadata Omni verifies), and the
// answer read as grpc-gateway writes it (one JSON object, or NDJSON `{"result":..}` / `{"error":..}`
// lines for streams; errors as google.rpc.Status).
//
// Wrapped in the runtime's own adapter (pkg/state/protobuf/client.NewAdapter) it is a state.CoreState,
// exactly as the runtime's own conformance test wraps its gRPC client: so the conformance suite judges
// a gateway-only server by the runtime's own reading of each answer.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/siderolabs/go-api-signature/pkg/message"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Limits on what is read from the server (a conformance run reads small messages), and on how long a
// unary call may take.
const (
	maxUnaryBytes = 32 << 20
	maxLineBytes  = 32 << 20
	unaryTimeout  = 30 * time.Second
)

var _ v1alpha1.StateClient = (*gatewayClient)(nil)

// gatewayClient implements v1alpha1.StateClient over the gateway at Endpoint (`http://host:port`).
type gatewayClient struct {
	HTTP     *http.Client
	Signer   message.Signer
	Endpoint string
	// Identity is the name put into the signature header (Omni does not compare it; it logs it).
	Identity string
	// Rename maps kinds on the way out and back (see kindRename); nil = none.
	Rename *kindRename
}

var marshal = protojson.MarshalOptions{UseProtoNames: true}

func (c *gatewayClient) url(method string) string {
	return strings.TrimSuffix(c.Endpoint, "/") + "/api/cosi.resource.State/" + method
}

// post signs and sends one call; the caller owns the response body.
func (c *gatewayClient) post(ctx context.Context, method string, in proto.Message) (*http.Response, error) {
	body, err := marshal.Marshal(in)
	if err != nil {
		return nil, err
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(method), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}

	req.Header.Set("Content-Type", "application/json")

	md := metadata.MD{}
	if err = message.NewGRPC(md, "/cosi.resource.State/"+method).Sign(c.Identity, c.Signer); err != nil {
		return nil, fmt.Errorf("signing %s: %w", method, err)
	}

	for k, vs := range md {
		for _, v := range vs {
			req.Header.Add("Grpc-Metadata-"+k, v)
		}
	}

	resp, err := c.HTTP.Do(req)
	if err != nil {
		// Like a broken gRPC connection: the runtime's adapter retries watches on it.
		return nil, status.Error(codes.Unavailable, err.Error())
	}

	return resp, nil
}

// unary makes one call. Once made, a short call is waited for even if the caller gives up meanwhile
// (bounded by unaryTimeout): the server may already have applied it, and the caller of an in-process
// State would see it done. Over gRPC the answers of calls on one connection come back in the order
// the server made them; over the gateway each call has its own exchange, and COSI's suite cancels a
// context while a call of its own is still in flight (TestTeardownAndDestroy: RemoveFinalizer races the
// server-side destroy it causes). TeardownAndDestroy blocks on the server by design, so it stays
// cancellable.
func (c *gatewayClient) unary(ctx context.Context, method string, in, out proto.Message) error {
	if method != "TeardownAndDestroy" {
		ctx = context.WithoutCancel(ctx)
	}

	ctx, cancel := context.WithTimeout(ctx, unaryTimeout)
	defer cancel()

	resp, err := c.post(ctx, method, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck

	data, err := io.ReadAll(io.LimitReader(resp.Body, maxUnaryBytes+1))
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}

	if len(data) > maxUnaryBytes {
		return status.Errorf(codes.ResourceExhausted, "%s: answer larger than %d bytes", method, maxUnaryBytes)
	}

	if resp.StatusCode != http.StatusOK {
		return statusFromBody(method, resp.StatusCode, data)
	}

	if err = protojson.Unmarshal(data, out); err != nil {
		return status.Errorf(codes.Internal, "%s: malformed answer %q: %v", method, data, err)
	}

	return nil
}

// statusFromBody reads a google.rpc.Status body (unary errors) or a stream's `{"error":{...}}` line.
func statusFromBody(method string, httpStatus int, data []byte) error {
	var envelope struct {
		Error json.RawMessage `json:"error"`
	}

	raw := data
	if json.Unmarshal(data, &envelope) == nil && envelope.Error != nil {
		raw = envelope.Error
	}

	var st spb.Status
	if err := protojson.Unmarshal(raw, &st); err != nil || st.GetCode() == 0 {
		return status.Errorf(codes.Internal, "%s: HTTP %d without a gRPC status: %q", method, httpStatus, data)
	}

	return status.FromProto(&st).Err()
}

// stream is a server stream read from NDJSON lines.
type stream[T any, PT interface {
	*T
	proto.Message
}] struct {
	grpc.ClientStream

	method string
	body   io.ReadCloser
	lines  *bufio.Reader
	done   error
	stop   func() bool
}

func openStream[T any, PT interface {
	*T
	proto.Message
}](ctx context.Context, c *gatewayClient, method string, in proto.Message) (*stream[T, PT], error) {
	resp, err := c.post(ctx, method, in)
	if err != nil {
		return nil, err
	}

	s := &stream[T, PT]{method: method, body: resp.Body, lines: bufio.NewReaderSize(resp.Body, 64<<10)}

	if resp.StatusCode != http.StatusOK {
		// The error before any line: the mapped HTTP status and one error body.
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxUnaryBytes))
		resp.Body.Close() //nolint:errcheck

		s.done = statusFromBody(method, resp.StatusCode, data)
		s.stop = func() bool { return false }

		return s, nil
	}

	// A canceled context ends the read at once (the runtime's adapter cancels watches this way).
	s.stop = context.AfterFunc(ctx, func() { resp.Body.Close() }) //nolint:errcheck

	return s, nil
}

func (s *stream[T, PT]) Recv() (*T, error) {
	if s.done != nil {
		return nil, s.done
	}

	for {
		line, err := s.readLine()
		if err != nil {
			s.done = err
			s.stop()
			s.body.Close() //nolint:errcheck

			return nil, err
		}

		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}

		var envelope struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}

		if err = json.Unmarshal(line, &envelope); err != nil {
			s.done = status.Errorf(codes.Internal, "%s: malformed stream line %q: %v", s.method, line, err)

			return nil, s.done
		}

		if envelope.Error != nil {
			s.done = statusFromBody(s.method, http.StatusOK, line)

			return nil, s.done
		}

		out := PT(new(T))
		if err = protojson.Unmarshal(envelope.Result, out); err != nil {
			s.done = status.Errorf(codes.Internal, "%s: malformed stream message %q: %v", s.method, envelope.Result, err)

			return nil, s.done
		}

		return (*T)(out), nil
	}
}

func (s *stream[T, PT]) readLine() ([]byte, error) {
	var line []byte

	for {
		chunk, isPrefix, err := s.lines.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return nil, io.EOF
			}

			if errors.Is(err, io.EOF) {
				return line, nil
			}

			return nil, status.Error(codes.Unavailable, err.Error())
		}

		line = append(line, chunk...)
		if len(line) > maxLineBytes {
			return nil, status.Errorf(codes.ResourceExhausted, "%s: stream line larger than %d bytes", s.method, maxLineBytes)
		}

		if !isPrefix {
			return line, nil
		}
	}
}

// withResource makes a unary call whose answer carries a resource, renamed back for the caller.
func withResource[T interface {
	proto.Message
	GetResource() *v1alpha1.Resource
}](ctx context.Context, c *gatewayClient, method string, in proto.Message, out T) (T, error) {
	if err := c.unary(ctx, method, in, out); err != nil {
		var none T

		return none, err
	}

	c.Rename.back(out.GetResource())

	return out, nil
}

// Get implements v1alpha1.StateClient.
func (c *gatewayClient) Get(ctx context.Context, in *v1alpha1.GetRequest, _ ...grpc.CallOption) (*v1alpha1.GetResponse, error) {
	return withResource(ctx, c, "Get", c.Rename.get(in), &v1alpha1.GetResponse{})
}

// List implements v1alpha1.StateClient.
func (c *gatewayClient) List(ctx context.Context, in *v1alpha1.ListRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[v1alpha1.ListResponse], error) {
	s, err := openStream[v1alpha1.ListResponse](ctx, c, "List", c.Rename.list(in))
	if err != nil {
		return nil, err
	}

	return &renamed[v1alpha1.ListResponse]{ServerStreamingClient: s, back: func(m *v1alpha1.ListResponse) { c.Rename.back(m.GetResource()) }}, nil
}

// Create implements v1alpha1.StateClient.
func (c *gatewayClient) Create(ctx context.Context, in *v1alpha1.CreateRequest, _ ...grpc.CallOption) (*v1alpha1.CreateResponse, error) {
	in = proto.CloneOf(in)
	c.Rename.out(in.GetResource())

	return withResource(ctx, c, "Create", in, &v1alpha1.CreateResponse{})
}

// Update implements v1alpha1.StateClient.
func (c *gatewayClient) Update(ctx context.Context, in *v1alpha1.UpdateRequest, _ ...grpc.CallOption) (*v1alpha1.UpdateResponse, error) {
	in = proto.CloneOf(in)
	c.Rename.out(in.GetNewResource())

	return withResource(ctx, c, "Update", in, &v1alpha1.UpdateResponse{})
}

// Destroy implements v1alpha1.StateClient.
func (c *gatewayClient) Destroy(ctx context.Context, in *v1alpha1.DestroyRequest, _ ...grpc.CallOption) (*v1alpha1.DestroyResponse, error) {
	in = proto.CloneOf(in)
	in.Namespace, in.Type = c.Rename.kind(in.Namespace, in.Type)
	out := &v1alpha1.DestroyResponse{}

	return out, c.unary(ctx, "Destroy", in, out)
}

// Watch implements v1alpha1.StateClient.
func (c *gatewayClient) Watch(ctx context.Context, in *v1alpha1.WatchRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[v1alpha1.WatchResponse], error) {
	in = proto.CloneOf(in)
	in.Namespace, in.Type = c.Rename.kind(in.Namespace, in.Type)

	s, err := openStream[v1alpha1.WatchResponse](ctx, c, "Watch", in)
	if err != nil {
		return nil, err
	}

	return &renamed[v1alpha1.WatchResponse]{ServerStreamingClient: s, back: func(m *v1alpha1.WatchResponse) {
		for _, e := range m.GetEvent() {
			c.Rename.back(e.GetResource())
			c.Rename.back(e.GetOld())
		}
	}}, nil
}

// Teardown implements v1alpha1.StateClient.
func (c *gatewayClient) Teardown(ctx context.Context, in *v1alpha1.TeardownRequest, _ ...grpc.CallOption) (*v1alpha1.TeardownResponse, error) {
	in = proto.CloneOf(in)
	in.Namespace, in.Type = c.Rename.kind(in.Namespace, in.Type)
	out := &v1alpha1.TeardownResponse{}

	return out, c.unary(ctx, "Teardown", in, out)
}

// TeardownAndDestroy implements v1alpha1.StateClient.
func (c *gatewayClient) TeardownAndDestroy(ctx context.Context, in *v1alpha1.TeardownAndDestroyRequest, _ ...grpc.CallOption) (*v1alpha1.TeardownAndDestroyResponse, error) {
	in = proto.CloneOf(in)
	in.Namespace, in.Type = c.Rename.kind(in.Namespace, in.Type)
	out := &v1alpha1.TeardownAndDestroyResponse{}

	return out, c.unary(ctx, "TeardownAndDestroy", in, out)
}

// renamed maps each received message back to the caller's kind.
type renamed[T any] struct {
	grpc.ServerStreamingClient[T]

	back func(*T)
}

func (r *renamed[T]) Recv() (*T, error) {
	m, err := r.ServerStreamingClient.Recv()
	if err == nil {
		r.back(m)
	}

	return m, err
}
