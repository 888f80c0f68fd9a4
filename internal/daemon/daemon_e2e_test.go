package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// The daemon end to end: plugins load and deliver; /readyz, /metrics and
// /debug/plugins say so; config reloads add and remove resources and
// refuse an invalid file with its line; SIGTERM's path drains the plugins
// and returns cleanly.
func TestDaemonEndToEnd(t *testing.T) {
	ns := env.Namespace(t)
	dir := env.DaemonDir(t, map[string][]byte{
		"counter.wasm": testenv.WAT(t, "../../host/testdata/plugins/counter.wat"),
		"broken.wasm":  []byte("not wasm"),
	})
	cfgPath := filepath.Join(dir, "config.yaml")
	cmsSelector := ""
	writeConfig := func(extraResources, bindings string) {
		t.Helper()
		text := testenv.DaemonConfig(ns, extraResources, bindings)
		if cmsSelector != "" {
			text = strings.Replace(text, `labelSelector: "`+testenv.SeenKeysSelector+`"`, "labelSelector: "+cmsSelector, 1)
		}
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("", "{resource: cms}")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}

	r := startReplica(t, cfg, Options{DrainTimeout: 30 * time.Second})
	d, logs, base, ctx := r.d, r.logs, r.url, context.Background()

	if code, _ := testenv.Get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	// broken.wasm keeps the process from being ready, and /readyz says why.
	testenv.Eventually(t, "/readyz to name broken.wasm", func() bool {
		code, body := testenv.Get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "plugin broken.wasm: failed") &&
			!strings.Contains(body, "counter.wasm")
	})
	if _, m := testenv.Get(t, base+"/metrics"); !strings.Contains(m, `informer_host_plugin_state{plugin="broken.wasm",state="failed"} 1`) ||
		!strings.Contains(m, `informer_host_plugin_reloads_total{outcome="refused",plugin="broken.wasm"} 1`) {
		t.Error("/metrics does not report broken.wasm as failed and refused")
	}
	if err := os.Remove(filepath.Join(dir, "plugins", "broken.wasm")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "/readyz 200 once broken.wasm is gone", func() bool {
		code, _ := testenv.Get(t, base+"/readyz")
		return code == http.StatusOK
	})

	cms := env.Client.CoreV1().ConfigMaps(ns)
	secrets := env.Client.CoreV1().Secrets(ns)
	for i := range 3 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lastCount := func() int {
		lines := logs.Lines("plugin=counter.wasm", `msg="count=`)
		if len(lines) == 0 {
			return -1
		}
		n, _ := strconv.Atoi(countRE.FindStringSubmatch(lines[len(lines)-1])[1])
		return n
	}
	testenv.Eventually(t, "counter to count 3 configmaps", func() bool { return lastCount() == 3 })

	_, body := testenv.Get(t, base+"/debug/plugins")
	for _, want := range []string{`"file": "counter.wasm"`, `"state": "running"`, `"sha256": "`, `"abiVersion": 1`, `"bindings": [`} {
		if !strings.Contains(body, want) {
			t.Errorf("/debug/plugins lacks %s:\n%s", want, body)
		}
	}
	_, metrics := testenv.Get(t, base+"/metrics")
	for _, want := range []string{
		`informer_host_plugin_events_total{plugin="counter.wasm",result="ok"} 3`,
		`informer_host_plugin_state{plugin="counter.wasm",state="running"} 1`,
		`informer_host_resource_synced{resource="cms"} 1`,
		`informer_host_resource_watch_failing_seconds{resource="cms"} 0`,
		`informer_host_resource_events_total{resource="cms",type="add"} 3`,
		`informer_host_plugin_handle_seconds_count{plugin="counter.wasm"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "cm-0") {
		t.Error("/metrics carries object names in labels")
	}

	// Add secrets and bind the counter to them: the reloaded plugin counts
	// both kinds.
	writeConfig("  - {name: secrets, version: v1, resource: secrets, namespaces: ["+ns+"]}", "{resource: cms}, {resource: secrets}")
	testenv.Eventually(t, "counter to count configmaps and secrets", func() bool { return lastCount() == 4 })
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a new secret to be counted", func() bool { return lastCount() == 5 })

	// An invalid file is refused with its line; the running config stays.
	if err := os.WriteFile(cfgPath, []byte("apiVersion: informer-host/v1\nresources:\n  - name: cms\n    colour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the invalid config to be refused", func() bool {
		return len(logs.Lines("config not reloaded", `config.yaml:4: unknown field \"colour\"`)) > 0
	})
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-after-invalid"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the running config to keep delivering", func() bool { return lastCount() == 6 })

	// Remove secrets again: its informer stops, the plugin counts configmaps only.
	writeConfig("", "{resource: cms}")
	testenv.Eventually(t, "counter back to configmaps only", func() bool { return lastCount() == 4 })
	for _, r := range d.pipeline.Status() {
		if r.Name == "secrets" {
			t.Errorf("secrets still configured after its removal: %+v", r)
		}
	}
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-last"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the last configmap to be counted", func() bool { return lastCount() == 5 })

	// Narrow the configmaps' watch with a selector: the plugins bound to
	// it start again from what the new watch holds.
	keep, err := cms.Get(ctx, "cm-last", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keep.Labels = map[string]string{"keep": "yes"}
	if _, err := cms.Update(ctx, keep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cmsSelector = "keep=yes"
	writeConfig("", "{resource: cms}")
	testenv.Eventually(t, "counter to hold only the selected configmap", func() bool { return lastCount() == 1 })

	if err := r.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if len(logs.Lines("plugin=counter.wasm", "shutdown events=")) == 0 {
		t.Error("the plugin's shutdown export did not run")
	}
	if len(logs.Lines("informer-host stopped")) != 1 {
		t.Error("no clean stop logged")
	}
}
