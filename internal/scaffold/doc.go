// Package scaffold writes a new plugin project (informer-host new) from
// the templates embedded from templates/<lang>/: adding a language is
// adding a directory. Files ending in .tmpl are text/template files
// (the suffix is dropped), given Data; "_name_" in a path is the
// project's name. Every template builds with `make` and passes its own
// replay test with `make test` (testdata/events.jsonl).
//
// The Rust and AssemblyScript projects start from their kit's own template
// (abi/rust/template, abi/assemblyscript/template), copied from the
// informer-host source directory (Data.Repo) with the template's name
// replaced; templates/<lang>/ holds only their Makefile and testdata
// (kits.go says why).
//
// Rule of direction: scaffold imports nothing of informer-host; the
// daemon's command (informer-host new) imports it.
package scaffold
