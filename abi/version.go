package abi

// ModuleVersion is the version of this module, the one the daemon's
// go.mod requires and `informer-host new` writes into a Go project's
// go.mod. It follows the ABI's minor version (ABI.md §14.1): a release
// that adds to ABI v1 tags this module v1.N.0. The daemon's tests check
// that go.mod and ABI.md agree with it.
const ModuleVersion = "v1.5.0"
