package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestPullCase runs case 4p once, small, as -smoke does: the daemon (built
// from ./cmd/informer-host) starts a Go plugin pulled from an in-process
// registry, cold and then from the source cache with the registry
// stopped, and the same module from the plugin directory, against the
// package's control plane; every start reaches the plugin's first event
// and the report has the two rows with their baselines.
func TestPullCase(t *testing.T) {
	env.Require(t)
	root, err := benchenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	h, err := newE2E(root, t.TempDir(), true, "", env, func(format string, args ...any) { t.Logf(format, args...) })
	if err != nil {
		t.Fatal(err)
	}
	runs, err := h.pull(1, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		if r.Plugin != "go-small" || r.Bytes < 1<<20 || r.First <= 0 {
			t.Errorf("run %+v: want go-small, a module over 1 MiB, a first event after the start", r)
		}
		seen[r.From+"/"+r.Cache] = true
	}
	for _, want := range []string{"oci/cold", "oci/cached", "directory/cold", "directory/warm"} {
		if !seen[want] {
			t.Errorf("no %s run in %+v", want, runs)
		}
	}
	res := &results{Pull: runs}
	res.pullRows()
	if len(res.rows) != 2 {
		t.Fatalf("rows %+v, want cold and cached", res.rows)
	}
	for _, r := range res.rows {
		if !strings.Contains(r.Base, "plugin directory") || !strings.HasSuffix(r.Ratio, "x") {
			t.Errorf("row %s: baseline %q, ratio %q: want the directory's figure and a ratio", fmt.Sprint(r.What), r.Base, r.Ratio)
		}
	}
}
