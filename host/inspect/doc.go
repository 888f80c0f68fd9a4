// Package inspect describes a plugin module for its author (informer-host
// inspect): ABI version, imports, exports, requested capabilities, and
// every reason this host would refuse it, each with what to do.
//
// Rule of direction: inspect is part of the embeddable daemon library
// (RATIONALE.md, "Project structure"). It imports abi and the engine
// (host/internal/engine), whose checks it reports, and nothing that runs
// plugins against a cluster (no host, no informer); cmd/informer-host's
// inspect command imports it.
package inspect
