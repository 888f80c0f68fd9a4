package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

const toolkitEvents = `{"informerHostEvents":1,"resources":{"cms":{"version":"v1","resource":"configmaps","kind":"ConfigMap"}}}
{"type":"add","resource":"cms","object":{"metadata":{"name":"a","namespace":"demo"}}}
`

// replay's exit code: 1 when the plugin fails or answers retry too
// often, unless --allow accepts it; 2 for bad usage.
func TestReplayExitCodes(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(toolkitEvents), 0o644); err != nil {
		t.Fatal(err)
	}
	plugin := func(name string) string {
		p := filepath.Join(dir, name+".wasm")
		if err := os.WriteFile(p, testenv.WAT(t, "../../host/testdata/fixtures/"+name+".wat"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--plugin", plugin("healthy")}, 0, "PASS"},
		{[]string{"--plugin", plugin("trap")}, 1, "wasm stack:"},
		{[]string{"--plugin", plugin("trap"), "--allow", "failure"}, 0, "PASS"},
		{[]string{"--plugin", plugin("retry"), "--max-retries", "1"}, 1, "retry-exhausted"},
		{[]string{"--plugin", plugin("retry"), "--allow", "retry-exhausted", "--json"}, 0, `"problems": null`},
		{[]string{"--plugin", plugin("healthy"), "--allow", "everything"}, 2, ""},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"replay", "--events", events}, tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%v: exit %d, want %d; output lacks %q?\n%s%s", tc.args, code, tc.code, tc.out, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"inspect", plugin("unknown-import")}, &out, &errb); code != 1 || !strings.Contains(out.String(), "--use abort=") {
		t.Errorf("inspect of a refused module: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

// record against the control plane, then replay of what it wrote: the
// initial list and a live add, both answered ok again.
func TestRecordCommand(t *testing.T) {
	ns := env.Namespace(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(dir, "plugins", "counter.wasm")
	if err := os.WriteFile(counter, testenv.WAT(t, "../../host/testdata/plugins/counter.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dir, ns, `
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: plugins
  default:
    bindings: [{resource: cms}]
`)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	out := filepath.Join(dir, "events.jsonl")
	done := make(chan error, 1)
	go func() {
		_, err := record(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), &host.Recorder{}, "", out)
		done <- err
	}()
	testenv.Eventually(t, "the counter to count the listed configmap", func() bool { return len(logs.Lines("plugin=counter.wasm", "count=1")) > 0 })
	if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the counter to count the created configmap", func() bool { return len(logs.Lines("plugin=counter.wasm", "count=2")) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"initialList":true`, `"name":"before"`, `"name":"after"`, `"result":"ok"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("recording lacks %s:\n%s", want, b)
		}
	}
	var rout, rerr bytes.Buffer
	if code := Main(context.Background(), []string{"replay", "--plugin", counter, "--events", out, "--compare"}, &rout, &rerr); code != 0 ||
		!strings.Contains(rout.String(), "count=2") {
		t.Errorf("replay of the recording: exit %d\n%s%s", code, rout.String(), rerr.String())
	}
}

// testConfig writes dir/kubeconfig for the control plane and
// dir/config.yaml (body with NS replaced by ns, after the apiVersion and
// kubeconfig lines), and loads it.
func testConfig(t *testing.T, dir, ns, body string) *config.Config {
	t.Helper()
	if err := env.WriteKubeconfig(filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	text := "apiVersion: informer-host/v1\nkubeconfig: kubeconfig\n" + strings.ReplaceAll(strings.TrimPrefix(body, "\n"), "NS", ns)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
