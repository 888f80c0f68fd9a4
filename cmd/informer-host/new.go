package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/informer-host/informer-host/internal/scaffold"
)

// newCommand scaffolds a plugin project (package scaffold).
func newCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("new", flag.ContinueOnError)
	lang := fs.String("lang", "go", "the plugin's language: "+strings.Join(scaffold.Languages(), ", "))
	dir := fs.String("dir", "", "where to create the project (default: ./NAME)")
	// --repo named the source checkout the kits were copied from; they
	// are in the binary now. It is still accepted, so that scripts and
	// READMEs written for it keep working, with a note to drop it.
	repo := fs.String("repo", "", "deprecated and ignored: the kits are in the binary")
	name, code, ok := parseOneArg(fs, args, stderr, "usage: informer-host new [--lang LANG] [--dir DIR] NAME")
	if !ok {
		return code
	}
	if *dir == "" {
		*dir = name
	}
	if *repo != "" {
		fmt.Fprintln(stderr, "informer-host new: --repo is deprecated and ignored: the kits and templates are in the binary, and the project has its own copy")
	}
	if err := scaffold.Write(*dir, *lang, scaffold.Data{Name: name}); err != nil {
		fmt.Fprintln(stderr, "informer-host new:", err)
		return 1
	}
	fmt.Fprintf(stdout, "created %s (%s): cd %s && make && make test\n", *dir, *lang, *dir)
	return 0
}
