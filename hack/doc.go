// Package hack holds the developer tooling behind the Makefile: building
// the control plane (controlplane/), `make cluster` (cluster/), `make demo`
// (demo/) and install-deps.sh, the one place that knows which system
// packages a fresh machine needs. The package itself only has the tests of
// those scripts and commands.
package hack
