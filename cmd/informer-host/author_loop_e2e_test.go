package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The plugin author's whole loop, for each kit (Go, Rust and
// AssemblyScript), with the real binary: `new` writes a project; the
// author replaces its handler with one that reads the cache (the Pod's
// ReplicaSet, then its Deployment), server-side applies a label to the
// Pod and records an Event, with a unit test that asserts both through
// the kit's fake host (testdata/authorloop/<lang>); `make test` passes
// (those tests, then the project's sample replay); `record` runs the
// plugin against the control plane with its controllers, where a real
// Deployment's Pods get the label, applied by the plugin as its own field
// manager, and an Event each; and `replay --compare` of that recording,
// with the stubs record wrote beside it and none by hand, passes.
func TestAuthorLoop(t *testing.T) {
	env.Require(t)
	env.Controllers(t)
	work := t.TempDir()
	bin, projectEnv := buildForProjects(t, work)
	const replicas = 2
	for _, tc := range []struct {
		lang string
		// nativePassed is what make test prints when the project's own
		// tests on the fake host passed.
		nativePassed string
	}{
		{lang: "go", nativePassed: "ok  \tlabeller-go"},
		{lang: "rust", nativePassed: "test result: ok. 3 passed"},
		{lang: "assemblyscript", nativePassed: "# pass 4\n# fail 0\n"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			name := "labeller-" + tc.lang
			dir := filepath.Join(work, name)
			if out, err := exec.Command(bin, "new", "--lang", tc.lang, "--dir", dir, name).CombinedOutput(); err != nil {
				t.Fatalf("new --lang %s: %v\n%s", tc.lang, err, out)
			}
			// What the author wrote replaces the generated handler and
			// its test, file for file.
			authored := filepath.Join("testdata", "authorloop", tc.lang)
			err := filepath.WalkDir(authored, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				rel, err := filepath.Rel(authored, p)
				if err != nil {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
			})
			if err != nil {
				t.Fatal(err)
			}
			out := makeAndTest(t, dir, projectEnv)
			if !strings.Contains(out, tc.nativePassed) || !strings.Contains(out, "\nPASS\n") {
				t.Fatalf("make test lacks %q or the replay's PASS:\n%s", tc.nativePassed, out)
			}

			ctx := context.Background()
			ns := env.Namespace(t)
			if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, testenv.Deployment("web", replicas), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pods := env.Client.CoreV1().Pods(ns)
			testenv.Eventually(t, fmt.Sprintf("the Deployment's %d Pods", replicas), func() bool {
				list, err := pods.List(ctx, metav1.ListOptions{})
				return err == nil && len(list.Items) == replicas
			})

			rec := filepath.Join(work, name+"-record")
			if err := os.MkdirAll(filepath.Join(rec, "plugins"), 0o755); err != nil {
				t.Fatal(err)
			}
			plugin := filepath.Join(dir, name+".wasm")
			b, err := os.ReadFile(plugin)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rec, "plugins", name+".wasm"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			testConfig(t, rec, ns, strings.ReplaceAll(`
resources:
  - {name: pods, version: v1, resource: pods, namespaces: [NS]}
  - {name: replicasets, group: apps, version: v1, resource: replicasets, namespaces: [NS]}
  - {name: deployments, group: apps, version: v1, resource: deployments, namespaces: [NS]}
plugins:
  directory: plugins
  modules:
  - file: PLUGIN.wasm
    bindings: [{resource: pods, events: [add, update]}]
    grants:
      cache: [{resource: pods}, {resource: replicasets}, {resource: deployments}]
      writes:
        resources: [{resource: pods, verbs: [apply], namespaces: [NS]}]
      events: {}
server:
  address: off
`, "PLUGIN", name))
			events := filepath.Join(rec, "events.jsonl")
			var stdout, stderr testenv.LogBuffer
			record := exec.Command(bin, "record", "--config", filepath.Join(rec, "config.yaml"), "--out", events)
			record.Stdout, record.Stderr = &stdout, &stderr
			if err := record.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- record.Wait() }()
			waited := false // whether exited has been received from
			t.Cleanup(func() {
				if !waited {
					_ = record.Process.Kill()
					<-exited
				}
			})
			recording := func(cond func() bool) func() bool {
				return func() bool {
					select {
					case err := <-exited:
						waited = true
						t.Fatalf("record ended early: %v\n%s%s", err, stdout.String(), stderr.String())
					default:
					}
					return cond()
				}
			}
			manager := "informer-host/" + name + ".wasm"
			testenv.Eventually(t, "every Pod labelled with its Deployment by "+manager, recording(func() bool {
				list, err := pods.List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) != replicas {
					return false
				}
				for _, p := range list.Items {
					if p.Labels["deployment"] != "web" || !appliedBy(p, manager) {
						return false
					}
				}
				return true
			}))
			testenv.Eventually(t, "an Event on each Pod", recording(func() bool {
				list, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Labelled"})
				if err != nil {
					return false
				}
				about := map[string]bool{}
				for _, e := range list.Items {
					if e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.Message, "deployment=web (through ReplicaSet web-") {
						about[e.InvolvedObject.Name] = true
					}
				}
				return len(about) == replicas
			}))
			if err := record.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			err = <-exited
			waited = true
			if err != nil {
				t.Fatalf("record: %v\n%s%s", err, stdout.String(), stderr.String())
			}
			stubs := filepath.Join(rec, "events.stubs.json")
			if !strings.Contains(stdout.String(), "recorded "+stubs) {
				t.Fatalf("record did not write the stubs file:\n%s%s", stdout.String(), stderr.String())
			}
			if got := answered(t, stubs); got["k8s_write"] != replicas || got["event_record"] != replicas {
				t.Errorf("recorded stubs answer %v successfully, want %d k8s_write and %d event_record", got, replicas, replicas)
			}

			replay := exec.Command(bin, "replay", "--plugin", plugin, "--events", events, "--stubs", stubs, "--compare")
			replay.Dir = dir
			b, err = replay.CombinedOutput()
			text := string(b)
			if err != nil || !strings.Contains(text, "\nPASS\n") || strings.Contains(text, "stubs to add (") {
				t.Fatalf("replay --compare with the recorded stubs: %v\n%s", err, text)
			}
			for call, want := range map[string]int{"k8s_write": replicas, "event_record": replicas} {
				if n := strings.Count(text, "    call "+call+" "); n != want {
					t.Errorf("replay made %d %s calls, want %d:\n%s", n, call, want, text)
				}
			}
			for _, res := range []string{"replicasets", "deployments"} {
				if !readFromCache(text, res) {
					t.Errorf("replay shows no cache read of %s that found it:\n%s", res, text)
				}
			}
		})
	}
}

// readFromCache reports whether a replay's output lists a cache_get of
// resource that returned a handle, not an error.
func readFromCache(replay, resource string) bool {
	for _, l := range strings.Split(replay, "\n") {
		if strings.HasPrefix(l, "    call cache_get ") && strings.Contains(l, `"resource":"`+resource+`"} -> `) && !strings.Contains(l, "-> -") {
			return true
		}
	}
	return false
}

// appliedBy reports whether manager owns fields of p through a
// server-side apply.
func appliedBy(p corev1.Pod, manager string) bool {
	for _, m := range p.ManagedFields {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// answered counts, by function, the stubs of a stub file that answer
// with success.
func answered(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Stubs []struct {
			Function string `json:"function"`
			Code     int    `json:"code"`
		} `json:"stubs"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := map[string]int{}
	for _, s := range f.Stubs {
		if s.Code == 0 {
			n[s.Function]++
		}
	}
	return n
}
