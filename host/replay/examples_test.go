package replay

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Every example plugin has a recorded stream (host's TestRecordExamples
// writes them: make example-recordings) that replays with the recorded
// results: no failure, no drop, no error, no result that differs. One
// that uses capabilities II has its stubs beside it (testdata/stubs.json).
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
		})
	}
}
