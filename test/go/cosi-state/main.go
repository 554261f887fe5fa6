// Command cosi-state serves cosi-project/runtime's in-memory State through the runtime's gRPC
// service and grpc-gateway handler the way Omni mounts them (server.go), on a loopback port:
//
//	cosi-state --public-key FILE [--public-key FILE ...] [--listen 127.0.0.1:0]
//
// When ready it prints one JSON line on stdout: {"endpoint":"http://127.0.0.1:PORT"}. It stops on
// SIGTERM or SIGINT, and when its standard input ends, so that a test runner that dies takes it along.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/siderolabs/go-api-signature/pkg/pgp"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cosi-state: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var keyFiles files

	listen := flag.String("listen", "127.0.0.1:0", "loopback HOST:PORT to serve on")
	flag.Var(&keyFiles, "public-key", "armored public PGP key whose signatures are accepted (repeatable)")
	flag.Parse()

	if len(keyFiles) == 0 {
		return errors.New("at least one --public-key is needed")
	}

	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}

	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: only loopback addresses are served", *listen)
	}

	keys := make([]*pgp.Key, 0, len(keyFiles))

	for _, f := range keyFiles {
		text, readErr := os.ReadFile(f)
		if readErr != nil {
			return readErr
		}

		k, parseErr := parsePublicKey(string(text))
		if parseErr != nil {
			return fmt.Errorf("%s: %w", f, parseErr)
		}

		keys = append(keys, k)
	}

	srv, err := newStateServer(keys)
	if err != nil {
		return err
	}
	defer srv.Close()

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}

	httpServer := &http.Server{Handler: srv.Handler, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)

	go func() { served <- httpServer.Serve(lis) }()

	ready, _ := json.Marshal(map[string]string{"endpoint": "http://" + lis.Addr().String()})
	fmt.Printf("%s\n", ready)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	stdinClosed := make(chan struct{})

	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()

	select {
	case <-ctx.Done():
	case <-stdinClosed:
	case err = <-served:
		return err
	}

	srv.Close()

	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	return httpServer.Shutdown(shutdown)
}
