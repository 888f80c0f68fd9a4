// Package hack holds the developer tooling behind the Makefile: building
// the control plane (controlplane/), `make cluster` (cluster/), `make demo`
// (demo/), `make crds` (crdgen/: the plugin resources' CRDs from the Go
// types), `make image` (image/, a module of its own so that
// go-containerregistry stays out of the main go.mod), the programs built
// once from the Go module proxy into the cache by version, each pinned by
// a nested module of its own (gotool.sh: shell-operator/ for `make bench`,
// oras/ and cosign/ for the interop tests of `make test`), and
// install-deps.sh, the one place that knows which system packages a fresh
// machine needs.
// The package itself only has the tests of those scripts and commands.
//
// Rule of direction: nothing imports hack; its tests import only the test
// environment (internal/testenv).
package hack
