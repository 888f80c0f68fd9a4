// Package housemap keeps the repository's maps true: README's Layout
// table against the folders of the tree, the table of where each plugin
// capability lives against the ABI, the kits and the config schema, every
// package's doc.go, the rules of direction between packages (RATIONALE.md,
// "Project structure") against what `go list` says they import, and the
// rule that code names concepts, not issue numbers.
//
// It has no code of its own, only tests, all fast (`make test-unit` runs
// them): a map that goes stale fails the build with what is missing,
// rather than misleading the next reader.
//
// Rule of direction: nothing imports housemap. Its tests import abi (the
// import table) and internal/config (the grant keys), and read the rest
// of the tree as files and through `go list`.
package housemap
