// Package scaffold writes a new plugin project (informer-host new) from
// the binary alone: the templates embedded from templates/<lang>/ (adding
// a language is adding a directory) and the kits of the abi module,
// embedded there (abi.Sources) since go:embed cannot reach another
// module's files. Files ending in .tmpl are text/template files (the
// suffix is dropped; makefile.tmpl holds the make rules they share);
// "_name_" in a path is the project's name. Every project builds with
// `make`, passes its own tests with `make test` (testdata/events.jsonl
// replayed, and the handler's native tests where the kit has a fake host)
// and carries its copy of the kit, wired with relative paths only, so it
// can be moved, committed and built by anyone (kits.go says how, per
// language). It never reads the informer-host repository.
//
// Rule of direction: only cmd/informer-host imports it; it imports the
// abi module and the standard library.
package scaffold
