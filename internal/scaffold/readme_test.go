package scaffold

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// goBuildLine is a build constraint line, as go/build reads one.
var goBuildLine = regexp.MustCompile(`(?m)^//go:build .*$`)

// README's Go plugin examples follow the Go template's rule: no wasip1
// build constraint, so that `go test` runs the handler natively on the
// kit's fake host (kittest); with one, a copied example builds for wasm
// and has no package to test. A new user copies README before running
// `informer-host new`.
func TestREADMEGoExamplesFollowTheTemplate(t *testing.T) {
	tmpl, err := templates.ReadFile("templates/go/main.go.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if m := goBuildLine.Find(tmpl); m != nil {
		t.Fatalf("templates/go/main.go.tmpl has %q; this test holds README to the template's rule that it has none", m)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	lines := strings.Split(string(readme), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, lines[i])
		}
		code := strings.Join(block, "\n")
		if !strings.Contains(code, "package main") || !strings.Contains(code, `"github.com/informer-host/informer-host/abi/kit"`) {
			continue
		}
		blocks++
		for j, l := range block {
			if goBuildLine.MatchString(l) {
				t.Errorf("README.md:%d: a Go plugin example has %q, which the template (templates/go/main.go.tmpl) leaves out so that go test can run the handler natively on kittest; drop it (the wasm build sets GOOS=wasip1)", start+1+j, l)
			}
		}
	}
	if blocks == 0 {
		t.Error("README.md has no Go plugin example (```go, package main, importing abi/kit); this test looks for one")
	}
}
