package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// informer-host record of a plugin that writes keeps what its writes got
// (events.stubs.json) and which events its own writes caused (selfWrite):
// replay --compare of that fresh recording, with the recorded stubs,
// passes and sees the self-write flags again; without them, the replay
// prints each stub it lacks once, readably, however often the plugin
// retried.
func TestRecordReplayWritingPlugin(t *testing.T) {
	labelEnforcer, err := os.ReadFile(filepath.Join("..", "..", "build", "plugins", "label-enforcer.wasm"))
	if err != nil {
		t.Fatalf("example plugin label-enforcer not built: run `make plugins`: %v", err)
	}
	for _, tc := range []struct {
		name string
		// listed is created before the recording starts (the initial
		// list), live while it runs; both are labelled.
		listed, live string
	}{
		{name: "listed and live pods", listed: "p-listed", live: "p-live"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
				t.Fatal(err)
			}
			plugin := filepath.Join(dir, "plugins", "label-enforcer.wasm")
			if err := os.WriteFile(plugin, labelEnforcer, 0o644); err != nil {
				t.Fatal(err)
			}
			testConfig(t, dir, ns, `
resources:
  - {name: pods, version: v1, resource: pods, namespaces: [NS]}
plugins:
  directory: plugins
  modules:
  - file: label-enforcer.wasm
    bindings: [{resource: pods, events: [add, update]}]
    config: {key: team, value: unowned}
    grants:
      writes:
        resources: [{resource: pods, verbs: [apply]}]
`)
			ctx := context.Background()
			pods := env.Client.CoreV1().Pods(ns)
			pod := func(name string) {
				if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			pod(tc.listed)
			rec := startRecord(ctx, t, dir)
			out := rec.out
			// The update each apply causes comes back flagged as the
			// plugin's own write, which it logs.
			ownWrite := func(name string) func() bool {
				return rec.logged("plugin=label-enforcer.wasm", "own write "+ns+"/"+name)
			}
			testenv.Eventually(t, "label-enforcer to see its write of the listed pod", ownWrite(tc.listed))
			pod(tc.live)
			testenv.Eventually(t, "label-enforcer to see its write of the live pod", ownWrite(tc.live))
			stubs := rec.stop()
			events, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(events, []byte(`"selfWrite":true`)); n != 2 {
				t.Errorf("recording holds %d self-write events, want 2 (one per pod):\n%s", n, events)
			}

			var rout, rerr bytes.Buffer
			args := []string{"replay", "--plugin", plugin, "--events", out, "--config", writeJSON(t, dir, `{"key":"team","value":"unowned"}`), "--compare"}
			code := Main(ctx, append(args, "--stubs", stubs), &rout, &rerr)
			text := rout.String()
			for _, want := range []string{"labelled " + ns + "/" + tc.listed, "labelled " + ns + "/" + tc.live,
				"own write " + ns + "/" + tc.listed, "own write " + ns + "/" + tc.live, "\nPASS\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("replay with the recorded stubs lacks %q", want)
				}
			}
			if code != 0 || strings.Contains(text, "stubs to add (") {
				t.Errorf("replay with the recorded stubs: exit %d", code)
			}
			if t.Failed() {
				t.Logf("replay:\n%s%s", text, rerr.String())
			}

			// Without the stubs every apply goes unanswered and is
			// retried; each one's stub is printed once.
			rout.Reset()
			if code := Main(ctx, args, &rout, &rerr); code == 0 {
				t.Errorf("replay without stubs passed")
			}
			text = rout.String()
			if strings.Count(text, "stubs to add (") != 1 || strings.Count(text, `"function": "k8s_write"`) != 2 ||
				!strings.Contains(text, `"name": "`+tc.live+`"`) {
				t.Errorf("replay without stubs does not list the two stubs to add once each:\n%s", text)
			}
		})
	}
}

// liveRecord is informer-host record running in the test's process.
type liveRecord struct {
	t      *testing.T
	out    string // the events file
	logs   *testenv.LogBuffer
	stdout bytes.Buffer
	cancel context.CancelFunc
	done   chan int
}

// startRecord runs informer-host record on dir's config.yaml, writing
// dir/events.jsonl, until stop.
func startRecord(ctx context.Context, t *testing.T, dir string) *liveRecord {
	ctx, cancel := context.WithCancel(ctx)
	r := &liveRecord{t: t, out: filepath.Join(dir, "events.jsonl"), logs: &testenv.LogBuffer{}, cancel: cancel, done: make(chan int, 1)}
	t.Cleanup(cancel)
	go func() {
		r.done <- Main(ctx, []string{"record", "--config", filepath.Join(dir, "config.yaml"), "--out", r.out}, &r.stdout, r.logs)
	}()
	return r
}

// logged is a condition for testenv.Eventually: a log line holds every
// substr. A record that ended early fails the test.
func (r *liveRecord) logged(substr ...string) func() bool {
	return func() bool {
		select {
		case code := <-r.done:
			r.t.Fatalf("record ended early: exit %d\n%s", code, strings.Join(r.logs.Lines(), "\n"))
		default:
		}
		return len(r.logs.Lines(substr...)) > 0
	}
}

// stop ends the recording as SIGINT does and returns the stub file it
// wrote beside the events file.
func (r *liveRecord) stop() string {
	r.cancel()
	if code := <-r.done; code != 0 {
		r.t.Fatalf("record: exit %d\n%s", code, strings.Join(r.logs.Lines(), "\n"))
	}
	stubs := strings.TrimSuffix(r.out, ".jsonl") + ".stubs.json"
	if !strings.Contains(r.stdout.String(), "recorded "+stubs) {
		r.t.Fatalf("record did not write the stubs file:\n%s", r.stdout.String())
	}
	return stubs
}

// writeJSON writes a plugin's configuration file for replay --config.
func writeJSON(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
