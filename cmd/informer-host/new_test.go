package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every language is written from the binary alone, wherever it runs;
// --repo, which used to name the source checkout, is accepted and ignored
// with a note.
func TestNewNeedsNoRepo(t *testing.T) {
	for _, tc := range []struct {
		lang  string
		args  []string
		files []string
		note  string
	}{
		{lang: "go", files: []string{"go.mod", "vendor/modules.txt"}},
		{lang: "c", files: []string{"include/informer_host.h"}},
		{lang: "rust", files: []string{"kit/src/lib.rs"}},
		{lang: "assemblyscript", files: []string{"kit/assembly/index.ts"}},
		{lang: "wat", files: []string{"main.wat"}},
		{lang: "go", args: []string{"--repo", "/nowhere"}, files: []string{"go.mod"}, note: "--repo is deprecated and ignored"},
	} {
		var out, errb bytes.Buffer
		dir := filepath.Join(t.TempDir(), "p")
		args := append(append([]string{"new", "--lang", tc.lang, "--dir", dir}, tc.args...), "p")
		if code := Main(context.Background(), args, &out, &errb); code != 0 {
			t.Errorf("%s %q: exit %d: %s", tc.lang, tc.args, code, errb.String())
		}
		for _, f := range tc.files {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
				t.Errorf("%s %q: %v", tc.lang, tc.args, err)
			}
		}
		if got := errb.String(); (tc.note == "") != (got == "") || !strings.Contains(got, tc.note) {
			t.Errorf("%s %q: stderr %q, want %q", tc.lang, tc.args, got, tc.note)
		}
	}
}
