package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/informer-host/informer-host/internal/scaffold"
)

// newCommand scaffolds a plugin project (package scaffold).
func newCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("new", flag.ContinueOnError)
	lang := fs.String("lang", "go", "the plugin's language: "+strings.Join(scaffold.Languages(), ", "))
	dir := fs.String("dir", "", "where to create the project (default: ./NAME)")
	repo := fs.String("repo", "", "the informer-host source `directory` (the Go kit, the C header, the Rust and AssemblyScript kits); default: the current directory if it is one")
	name, code, ok := parseOneArg(fs, args, stderr, "usage: informer-host new [--lang LANG] [--dir DIR] [--repo DIR] NAME")
	if !ok {
		return code
	}
	if *dir == "" {
		*dir = name
	}
	if *repo == "" {
		if b, err := os.ReadFile("go.mod"); err == nil && strings.HasPrefix(string(b), "module github.com/informer-host/informer-host\n") {
			*repo = "."
		}
	}
	if *repo != "" {
		abs, err := filepath.Abs(*repo)
		if err != nil {
			fmt.Fprintln(stderr, "informer-host new:", err)
			return 1
		}
		*repo = abs
	} else if *lang == "go" || *lang == "c" || *lang == "rust" || *lang == "assemblyscript" {
		fmt.Fprintln(stderr, "informer-host new: --repo: give the informer-host source directory (the kit and header the project builds with)")
		return 2
	}
	if err := scaffold.Write(*dir, *lang, scaffold.Data{Name: name, Repo: *repo}); err != nil {
		fmt.Fprintln(stderr, "informer-host new:", err)
		return 1
	}
	fmt.Fprintf(stdout, "created %s (%s): cd %s && make && make test\n", *dir, *lang, *dir)
	return 0
}
