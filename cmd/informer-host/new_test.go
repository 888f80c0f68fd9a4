package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Outside the source directory, only WAT needs no --repo: the other
// languages build with a kit or header from it.
func TestNewNeedsRepo(t *testing.T) {
	for _, tc := range []struct {
		lang string
		code int
	}{{"go", 2}, {"c", 2}, {"rust", 2}, {"assemblyscript", 2}, {"wat", 0}} {
		var out, errb bytes.Buffer
		dir := filepath.Join(t.TempDir(), "p")
		code := Main(context.Background(), []string{"new", "--lang", tc.lang, "--dir", dir, "p"}, &out, &errb)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d: %s", tc.lang, code, tc.code, errb.String())
		}
		if tc.code != 0 && !strings.Contains(errb.String(), "--repo: give the informer-host source directory") {
			t.Errorf("%s: %q does not ask for --repo", tc.lang, errb.String())
		}
	}
}
