package replay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Every example plugin has a recorded stream (host's TestRecordExamples
// and TestRecordControllerExamples write them: make example-recordings)
// that replays with the recorded results: no failure, no drop, no error,
// no result (or reconcile's children, status, requeue-after) that
// differs. One that uses capabilities II or controller writes has its
// stubs beside it (testdata/stubs.json), and makes the calls they
// answer, no more.
func TestExampleRecordings(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the built example plugins, minutes of it, which -short leaves out")
	}
	files, err := filepath.Glob("../../plugins/examples/*/testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir("../../plugins/examples")
	dirs := 0
	for _, e := range entries {
		if e.IsDir() {
			dirs++
		}
	}
	if len(files) == 0 || len(files) != dirs {
		t.Fatalf("%d recordings for %d examples", len(files), dirs)
	}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(filepath.Dir(f)))
		t.Run(name, func(t *testing.T) {
			wasm, err := os.ReadFile(filepath.Join("../../build/plugins", name+".wasm"))
			if err != nil {
				t.Fatalf("example not built: run `make plugins` (make test does): %v", err)
			}
			rec, err := ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "config.json"))
			o := Options{Plugin: name + ".wasm", Wasm: wasm, Events: rec, Config: cfg, MaxRetries: 3}
			// A plugin using capabilities II answers its writes, Events
			// and HTTP calls from testdata/stubs.json.
			if sf := filepath.Join(filepath.Dir(f), "stubs.json"); fileExists(sf) {
				if o.Stubs, err = ReadStubs(sf); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Counts
			if c.Events == 0 || c.OK != c.Events || c.Failures+c.Mismatches+c.Dropped+c.Errors+c.RetryExhausted != 0 {
				t.Errorf("counts %+v", c)
			}
			// As replay --compare holds them: every call the recording
			// made, no other (a reconcile's children and status included).
			if c.UnstubbedCalls+c.RepeatedCalls != 0 {
				t.Errorf("calls the recording did not make: %+v", c)
			}
			for _, u := range rep.UnusedStubs {
				if !u.Retry {
					t.Errorf("stubs[%d] (%s) unused: the recording made a call the replay did not", u.Index, Describe(u.Function, u.Request))
				}
			}
		})
	}
}

// An event the plugin answers RETRY for, because what it reads has not
// reached the cache yet, waits while the recording goes on and is
// delivered again once a later cache line has moved the world, as a live
// retry waits out its backoff: team-labeler's Pod arrives before its
// ReplicaSet and Deployment, and is labelled once they are cached, with
// nothing given up on however small MaxRetries is.
func TestRetryWaitsForTheRecordedCache(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a built example plugin, which -short leaves out")
	}
	dir := "../../plugins/examples/team-labeler/testdata"
	wasm, err := os.ReadFile("../../build/plugins/team-labeler.wasm")
	if err != nil {
		t.Fatalf("example not built: run `make plugins` (make test does): %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// head, the two cache lines, synced, add, update: the Pod's add
	// goes first, the owners' cache lines after it.
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 6 || !strings.Contains(lines[1], `"type":"cache"`) || !strings.Contains(lines[4], `"type":"add"`) {
		t.Fatalf("team-labeler's recording changed shape; this test moves its lines 1-2 after line 4:\n%s", b)
	}
	reordered := lines[0] + lines[3] + lines[4] + lines[1] + lines[2] + lines[5]
	f := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(f, []byte(reordered+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	o := Options{Plugin: "team-labeler.wasm", Wasm: wasm, Events: rec, Config: cfg, MaxRetries: 0}
	if o.Stubs, err = ReadStubs(filepath.Join(dir, "stubs.json")); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, s := range rep.Steps {
		if s.Call == "ih_handle" {
			results = append(results, s.Result)
		}
	}
	// add: retry (no ReplicaSet), retry again after the ReplicaSet's line
	// (no Deployment), ok after the Deployment's; then the update.
	if want := "retry,retry,ok,ok"; strings.Join(results, ",") != want {
		t.Errorf("ih_handle results %v, want %s\n%+v", results, want, rep.Steps)
	}
	if rep.Counts.RetryExhausted != 0 || rep.Counts.Retries != 2 {
		t.Errorf("counts %+v: want 2 retries and nothing given up on", rep.Counts)
	}
}
