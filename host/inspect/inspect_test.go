package inspect

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func wasm(t *testing.T, name string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".wasm")
	if b, err := exec.Command("wat2wasm", filepath.Join("../testdata/fixtures", name+".wat"), "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", name, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every conformance fixture: whether it loads, and each refusal's words
// and hint.
func TestFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		loads     bool
		versions  string
		requested string
		problem   string // a substring of one problem
		hint      string // a substring of one hint
	}{
		{fixture: "healthy", loads: true, versions: "1"},
		{fixture: "state", loads: true, versions: "1", requested: "state"},
		{fixture: "metrics", loads: true, versions: "1", requested: "metrics"},
		{fixture: "abi-v2", versions: "2", problem: "speaks ABI v2", hint: "rebuild the plugin"},
		{fixture: "command", versions: "1", problem: "so it is a WASI command", hint: "-buildmode=c-shared"},
		{fixture: "missing-handle", versions: "1", problem: "missing required export ih_handle"},
		{fixture: "bad-signatures", versions: "1", problem: "has signature"},
		{fixture: "unknown-import", versions: "1", problem: `"env"."abort"`, hint: "--use abort=~lib/informer-host-as/assembly/index/abort`"},
		{fixture: "startloop", versions: "1", problem: "exceeded its", hint: "move slow work out"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r, err := Module(context.Background(), tc.fixture+".wasm", wasm(t, tc.fixture), Options{StartTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Loads != tc.loads {
				t.Errorf("loads %v, want %v; problems %q", r.Loads, tc.loads, r.Problems)
			}
			var vs []string
			for _, v := range r.ABIVersions {
				vs = append(vs, string(rune('0'+v)))
			}
			if got := strings.Join(vs, ","); got != tc.versions {
				t.Errorf("ABI versions %q, want %q", got, tc.versions)
			}
			if got := strings.Join(r.Requested, ","); got != tc.requested {
				t.Errorf("requested %q, want %q", got, tc.requested)
			}
			if tc.problem != "" && !strings.Contains(strings.Join(r.Problems, "\n"), tc.problem) {
				t.Errorf("problems %q lack %q", r.Problems, tc.problem)
			}
			if tc.hint != "" && !strings.Contains(strings.Join(r.Hints, "\n"), tc.hint) {
				t.Errorf("hints %q lack %q", r.Hints, tc.hint)
			}
			if len(r.Exports) == 0 {
				t.Error("no exports listed")
			}
		})
	}
}
