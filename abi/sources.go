package abi

import (
	"embed"
	"io/fs"
)

// The kits' sources and the Rust and AssemblyScript templates, for
// `informer-host new`: a project it writes carries its own copy of the kit,
// so the daemon's binary must hold them, and go:embed can only reach files
// of its own module. The patterns name files, never whole directories,
// because building the kits in place leaves node_modules/, build/ and
// target/ beside them. A plugin that imports abi/kit does not get these
// bytes: the linker drops the variable when nothing calls Sources.
//
//go:embed go.mod
//go:embed abi.go doc.go header.go path.go version.go
//go:embed kit/*.go kit/kittest/*.go
//go:embed include/informer_host.h include/informer_host_reconcile.h
//go:embed rust/Cargo.toml rust/src/*.rs
//go:embed rust/template/Cargo.toml rust/template/build.sh rust/template/plugin.rs rust/template/.gitignore
//go:embed assemblyscript/package.json assemblyscript/assembly/*.ts assemblyscript/fake/host.mjs
//go:embed assemblyscript/template/package.json assemblyscript/template/.gitignore
//go:embed assemblyscript/template/assembly/*.ts assemblyscript/template/assembly/tsconfig.json
var sources embed.FS

// Sources returns the abi module's files that a new plugin project copies,
// by their paths in the module (kit/kit.go, rust/src/lib.rs,
// assemblyscript/template/package.json, ...). Test files are among them;
// a copy leaves them out as it sees fit.
func Sources() fs.FS { return sources }
