module stub-provider.test/cosi-state

go 1.26.2

// Asked for: cosi-project/runtime v1.11.0, go-api-signature v0.3.10, omni/client v1.5.0. Through
// omni/client and the talos machinery it needs, minimal version selection raises the runtime to
// v1.16.1 and go-api-signature to v0.3.12 (Omni 1.9.3 pins runtime v1.16.2): those are what run.
require (
	github.com/ProtonMail/gopenpgp/v2 v2.10.0
	github.com/cosi-project/runtime v1.16.1
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0
	github.com/siderolabs/go-api-signature v0.3.12
	github.com/siderolabs/omni/client v1.5.0
	github.com/stretchr/testify v1.11.1
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260504160031-60b97b32f348
	google.golang.org/grpc v1.81.0
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/ProtonMail/go-crypto v1.4.1 // indirect
	github.com/ProtonMail/go-mime v0.0.0-20230322103455-7d82a3887f2f // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cloudflare/circl v1.6.3 // indirect
	github.com/containerd/go-cni v1.1.13 // indirect
	github.com/containernetworking/cni v1.3.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/gertd/go-pluralize v0.2.1 // indirect
	github.com/google/cel-go v0.28.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/jsimonetti/rtnetlink/v2 v2.2.1-0.20260317095713-310581b9c6ac // indirect
	github.com/klauspost/compress v1.18.6 // indirect
	github.com/mdlayher/ethtool v0.6.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.10.0 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/petermattis/goid v0.0.0-20251121121749-a11dd1a45f9a // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20250313105119-ba97887b0a25 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/ryanuber/go-glob v1.0.0 // indirect
	github.com/sasha-s/go-deadlock v0.3.6 // indirect
	github.com/siderolabs/crypto v0.6.5 // indirect
	github.com/siderolabs/gen v0.8.6 // indirect
	github.com/siderolabs/go-pointer v1.0.1 // indirect
	github.com/siderolabs/net v0.4.0 // indirect
	github.com/siderolabs/protoenc v0.2.4 // indirect
	github.com/siderolabs/talos/pkg/machinery v1.13.0-alpha.0.0.20260126095012-b9e27ebe72c4 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.4 // indirect
	golang.org/x/crypto v0.52.0 // indirect
	golang.org/x/exp v0.0.0-20251113190631-e25ba8c21ef6 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260504160031-60b97b32f348 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

// omni/client v1.5.0 requires a pseudo-version of talos machinery that the module proxy refuses; the
// served v1.14.0-alpha.1 builds.
replace github.com/siderolabs/talos/pkg/machinery => github.com/siderolabs/talos/pkg/machinery v1.14.0-alpha.1
