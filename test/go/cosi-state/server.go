// The server: cosi-project/runtime's in-memory State the way Omni serves its own: the
// runtime's `cosi.resource.State` gRPC service, reached through the runtime's grpc-gateway handler
// under /api with the JSON marshaller options Omni sets (docs/omni-wire.md 1.3), gzip in front, and
// siderov1 signatures verified by go-api-signature in a gRPC interceptor behind the gateway (the
// gateway turns Grpc-Metadata-* headers into the metadata the interceptor reads, as in Omni).
//
// It is a test peer: the TypeScript client's State API suite runs against it as well as against the
// simulated Omni, so what the client expects is checked against COSI itself.

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	gateway "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/siderolabs/go-api-signature/pkg/message"
	"github.com/siderolabs/go-api-signature/pkg/pgp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	// Omni's resource types, registered with the runtime's protobuf registry by their init functions:
	// their specs are decoded on Create/Update and yaml_spec is rendered by Omni's own Go types.
	_ "github.com/siderolabs/omni/client/pkg/omni/resources/infra"
	_ "github.com/siderolabs/omni/client/pkg/omni/resources/omni"
	_ "github.com/siderolabs/omni/client/pkg/omni/resources/siderolink"
	_ "github.com/siderolabs/omni/client/pkg/omni/resources/system"
)

// maxMessageSize is Omni's constants.GRPCMaxMessageSize.
const maxMessageSize = 32 * 1024 * 1024

// errInvalidSignature is what Omni answers for every signature failure (docs/omni-wire.md 3.3).
var errInvalidSignature = status.Error(codes.Unauthenticated, "invalid signature")

// stateServer is the gRPC service and its gateway; Handler serves /api/.
type stateServer struct {
	Handler http.Handler

	grpc *grpc.Server
	// stopGateway ends the gateway's connection to the gRPC server.
	stopGateway context.CancelFunc
}

// newStateServer builds the server. Requests must be signed by one of keys (public PGP keys, looked up by
// fingerprint as Omni does).
func newStateServer(keys []*pgp.Key) (*stateServer, error) {
	byFingerprint := make(map[string]*pgp.Key, len(keys))
	for _, k := range keys {
		byFingerprint[k.Fingerprint()] = k
	}

	// Omni's in-memory stores use a history of 10000 events with a gap of 20.
	st := state.WrapCore(namespaced.NewState(func(ns string) state.CoreState {
		return inmem.NewStateWithOptions(inmem.WithHistoryMaxCapacity(10000), inmem.WithHistoryGap(20))(ns)
	}))

	verify := func(ctx context.Context, method string) error { return verifySignature(ctx, method, byFingerprint) }
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMessageSize),
		grpc.ChainUnaryInterceptor(recoverUnary, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := verify(ctx, info.FullMethod); err != nil {
				return nil, err
			}

			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(recoverStream, func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := verify(ss.Context(), info.FullMethod); err != nil {
				return err
			}

			return handler(srv, ss)
		}),
	)
	v1alpha1.RegisterStateServer(srv, cosiserver.NewState(st))

	// The gateway reaches the gRPC server over an in-memory connection, as Omni's does (memconn).
	lis := bufconn.Listen(1 << 20)

	go srv.Serve(lis) //nolint:errcheck // ends with Close

	mux := gateway.NewServeMux(gateway.WithMarshalerOption(gateway.MIMEWildcard, &gateway.JSONPb{
		MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, UseEnumNumbers: true},
	}))

	ctx, cancel := context.WithCancel(context.Background())

	err := v1alpha1.RegisterStateHandlerFromEndpoint(ctx, mux, "passthrough:///cosi-state", []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31 - 1)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
	})
	if err != nil {
		cancel()
		srv.Stop()

		return nil, fmt.Errorf("registering the gateway: %w", err)
	}

	h := http.NewServeMux()
	h.Handle("/api/", compress(http.StripPrefix("/api", mux)))

	return &stateServer{Handler: h, grpc: srv, stopGateway: cancel}, nil
}

// Close stops the gRPC server (open streams included) and the gateway's connection.
func (s *stateServer) Close() {
	s.stopGateway()
	s.grpc.Stop()
}

func verifySignature(ctx context.Context, method string, keys map[string]*pgp.Key) error {
	md, _ := metadata.FromIncomingContext(ctx)
	msg := message.NewGRPC(md, method)

	// go-api-signature indexes the header's fields without checking their count; Omni's panic
	// recovery would answer Internal, a well-formed refusal is enough here.
	if h := md.Get(message.SignatureHeaderKey); len(h) > 0 && len(strings.Split(h[0], " ")) < 4 {
		return errInvalidSignature
	}

	sig, err := msg.Signature()
	if err != nil {
		return errInvalidSignature
	}

	key, ok := keys[sig.KeyFingerprint]
	if !ok {
		return errInvalidSignature
	}

	if err = msg.VerifySignature(key); err != nil {
		return errInvalidSignature
	}

	return nil
}

// recoverUnary and recoverStream answer Internal for a panic, as Omni's recovery interceptor does.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "%v", p)
		}
	}()

	return handler(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "%v", p)
		}
	}()

	return handler(srv, ss)
}

// parsePublicKey reads an armored public PGP key.
func parsePublicKey(armored string) (*pgp.Key, error) {
	key, err := pgpKeyFromArmored(armored)
	if err != nil {
		return nil, err
	}

	if key.IsPrivate() {
		return nil, errors.New("expected a public key, got a private one")
	}

	return key, nil
}
