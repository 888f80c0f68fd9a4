// Package abi is the informer-host plugin ABI, version 1, in Go: the names
// of every import and export, their signatures, the result and error codes,
// the event header's byte layout and the field path syntax. ABI.md beside
// this file is the normative specification and RATIONALE.md explains it;
// this package is its executable form, shared by the host
// (host/internal/engine) and the Go plugin kit (abi/kit). include/ holds
// the same contract for C.
//
// It also carries the kits' own sources (Sources), which `informer-host
// new` copies into a plugin project, and the module's version
// (ModuleVersion), which that project requires.
//
// The package imports nothing but the standard library so that it builds
// for GOOS=wasip1 GOARCH=wasm as well as for the host.
//
// Every value here is part of the wire contract between a host and plugins
// compiled against it: changing one is an incompatible change and needs a
// new ABI version (a new import module name and a new marker export).
//
// Rule of direction: abi imports the standard library only, and anything
// may import it: the daemon, the kits, plugins and other hosts.
package abi
