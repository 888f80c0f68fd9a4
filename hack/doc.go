// Package hack holds the developer tooling behind the Makefile: building
// the control plane (controlplane/), `make cluster` (cluster/), `make demo`
// (demo/), `make image` (image/, a module of its own so that
// go-containerregistry stays out of the main go.mod) and install-deps.sh,
// the one place that knows which system packages a fresh machine needs.
// The package itself only has the tests of those scripts and commands.
//
// Rule of direction: nothing imports hack; its tests import only the test
// environment (internal/testenv).
package hack
