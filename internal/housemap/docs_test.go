package housemap

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every package of both modules says what it owns and who may import it
// in its doc.go; a command (package main: the daemon, the development
// commands, the plugins) says what it does in its package comment, in
// main.go or doc.go, and nothing can import it.
func TestEveryPackageHasItsDoc(t *testing.T) {
	for _, p := range goList(t, "./...", "./abi/...") {
		dir := rel(t, p.Dir)
		if strings.HasPrefix(dir, "build/") {
			continue
		}
		if p.Name == "main" {
			if p.Doc == "" {
				t.Errorf("%s: the command has no package comment saying what it does", dir)
			}
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: no doc.go (what the package owns, and its rule of direction): %v", dir, err)
			continue
		}
		doc := f.Doc.Text()
		switch {
		case !strings.HasPrefix(doc, "Package "+p.Name+" "):
			t.Errorf("%s/doc.go: the package comment does not start %q", dir, "Package "+p.Name)
		case !strings.Contains(strings.ToLower(doc), "rule of direction"):
			t.Errorf("%s/doc.go: the package comment does not state its rule of direction (who may import it, what it imports)", dir)
		}
	}
}
