// COSI's own conformance suite (cosi-project/runtime pkg/state/conformance) over an Omni-style /api
// gateway, through the gateway client wrapped in the runtime's own adapter:
//
//   - TestSim runs it against a simulated Omni (`stub-provider sim`) that the caller started: its
//     endpoint in COSI_SIM_ENDPOINT, the OMNI_SERVICE_ACCOUNT_KEY of an infra provider it knows in
//     COSI_SIM_KEY. The suite's resources are renamed into that provider's own namespace (kindRename).
//   - TestServer runs it against the runtime's own in-memory State behind the same gateway (server.go),
//     in process. It calibrates the client: a case that passes here and fails against the
//     sim fails because of the sim.
//
// test/integration/cosi-conformance.test.ts runs both and checks each case against the list of cases
// that cannot apply to a gateway-only server (not-applicable.yaml beside this file).

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/conformance"
	"github.com/cosi-project/runtime/pkg/state/protobuf/client"
	"github.com/siderolabs/go-api-signature/pkg/pgp"
	"github.com/siderolabs/go-api-signature/pkg/serviceaccount"
	"github.com/stretchr/testify/suite"
)

func init() {
	if err := protobuf.RegisterResource(conformance.PathResourceType, &conformance.PathResource{}); err != nil {
		panic(err)
	}
}

// httpClient has no overall timeout: watches stream for as long as the suite reads them; unary
// calls are bounded by the gateway client itself.
var httpClient = &http.Client{}

func newState(c *gatewayClient) state.State {
	// Watch retries off: a stream the server breaks must show, not be papered over by a resume.
	return state.WrapCore(client.NewAdapter(c, client.WithDisableWatchRetry()))
}

func TestSim(t *testing.T) {
	endpoint, key := os.Getenv("COSI_SIM_ENDPOINT"), os.Getenv("COSI_SIM_KEY")
	if endpoint == "" || key == "" {
		t.Fatal("COSI_SIM_ENDPOINT and COSI_SIM_KEY are needed: start `stub-provider sim` first (test/integration/cosi-conformance.test.ts does)")
	}

	sa, err := serviceaccount.Decode(key)
	if err != nil {
		t.Fatalf("COSI_SIM_KEY: %v", err)
	}

	providerID, ok := strings.CutPrefix(sa.Name, "infra-provider:")
	if !ok {
		t.Fatalf("COSI_SIM_KEY: %q is not an infra provider's service account", sa.Name)
	}

	suite.Run(t, &conformance.StateSuite{
		State: newState(&gatewayClient{
			HTTP: httpClient, Signer: sa.Key, Endpoint: endpoint, Identity: sa.Name,
			Rename: &kindRename{
				FromNamespace: conformance.PathResourceDefaultNamespace, ToNamespace: "infra-provider:" + providerID,
				FromType: conformance.PathResourceType, ToType: "Paths." + providerID + ".infraprovider.sidero.dev",
			},
		}),
	})
}

func TestServer(t *testing.T) {
	key, err := pgp.GenerateKey("cosi", "conformance", "cosi@infra-provider.serviceaccount.omni.sidero.dev", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	armored, err := key.ArmorPublic()
	if err != nil {
		t.Fatal(err)
	}

	public, err := parsePublicKey(armored)
	if err != nil {
		t.Fatal(err)
	}

	srv, err := newStateServer([]*pgp.Key{public})
	if err != nil {
		t.Fatal(err)
	}

	// HTTP/1.1 and cleartext HTTP/2 as Omni serves them; the client speaks h2c (see h2cClient).
	hs := httptest.NewUnstartedServer(srv.Handler)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})

	suite.Run(t, &conformance.StateSuite{
		State:      newState(&gatewayClient{HTTP: h2cClient(), Signer: key, Endpoint: hs.URL, Identity: "infra-provider:cosi"}),
		Namespaces: []string{"default", "infra-provider:cosi"},
	})
}

// TestCases prints the suite's cases, one per line ("CASE <name>"), for the TypeScript side to name
// its tests before running them.
func TestCases(t *testing.T) {
	st := reflect.TypeFor[*conformance.StateSuite]()
	for i := range st.NumMethod() {
		if name := st.Method(i).Name; strings.HasPrefix(name, "Test") {
			t.Logf("CASE %s", name)
		}
	}
}

// h2cClient speaks cleartext HTTP/2 with prior knowledge: every call shares one connection.
func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)

	return &http.Client{Transport: tr}
}
