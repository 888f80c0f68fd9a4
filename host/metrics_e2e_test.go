package host

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
)

const metricsConfig = `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS, NS-b, NS-c]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
  modules:
    - file: metrics.wasm
      grants:
        metrics: {maxSeries: 3}
`

// gather scrapes the host as server.Attach registers it: the Host and its
// plugins' own metrics in one registry.
func (hs *harness) gather() map[string]*dto.MetricFamily {
	hs.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(hs.h, hs.h.PluginMetrics())
	mfs, err := reg.Gather()
	if err != nil {
		hs.t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// pluginMetric returns the value of the series of name whose labels are
// exactly labels, or -1 if there is none.
func (hs *harness) pluginMetric(name string, labels map[string]string) float64 {
	mf := hs.gather()[name]
	if mf == nil {
		return -1
	}
	for _, m := range mf.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if match {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return -1
}

// A granted plugin counts events per namespace on the host's /metrics;
// the count survives a reload with the same declaration; past its series
// cap updates are dropped and counted; a plugin without the grant gets
// ERR_DENIED; removing the file drops its series.
func TestPluginMetrics(t *testing.T) {
	wasm := fixture(t, "metrics")
	hs, err := newHarness(t, metricsConfig, map[string][]byte{"metrics.wasm": wasm, "denied.wasm": wasm})
	if err != nil {
		t.Fatal(err)
	}
	nsB, nsC := hs.ns+"-b", hs.ns+"-c"
	for _, ns := range []string{nsB, nsC} {
		if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
	}
	create := func(ns, name string) {
		t.Helper()
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const events = "informer_host_plugin_metric_events_total"
	byNS := func(ns string) float64 {
		return hs.pluginMetric(events, map[string]string{"plugin": "metrics.wasm", "namespace": ns})
	}
	create(hs.ns, "a")
	create(hs.ns, "b")
	create(nsB, "c")
	calls := func() float64 {
		return hs.pluginMetric("informer_host_plugin_metric_calls_total", map[string]string{"plugin": "metrics.wasm"})
	}
	eventually(t, "events counted per namespace", func() bool { return byNS(hs.ns) == 2 && byNS(nsB) == 1 && calls() == 3 })
	// The buffer's cap is exported next to its depth, so an alert can say
	// "near full" (deploy/monitoring).
	if v := hs.pluginMetric("informer_host_plugin_buffer_capacity", map[string]string{"plugin": "metrics.wasm"}); v != config.DefaultBufferSize {
		t.Errorf("buffer capacity %v, want the default bufferSize %d", v, config.DefaultBufferSize)
	}

	// Not granted: the same module's calls are refused, logged as the
	// plugin's error, and export nothing.
	eventually(t, "the ungranted plugin's errors", func() bool {
		return len(hs.logs.lines("plugin=denied.wasm", "ERR_DENIED")) >= 3
	})
	if v := hs.pluginMetric(events, map[string]string{"plugin": "denied.wasm", "namespace": hs.ns}); v != -1 {
		t.Errorf("the ungranted plugin exports %v", v)
	}
	for _, o := range hs.rec.of("denied.wasm") {
		if o.Type != 0 && o.Code != engine.CodeError {
			t.Errorf("ungranted plugin: %v, want error", o)
		}
	}

	// Series cap: calls_total and two namespaces make 3; a third namespace
	// is dropped and counted.
	create(nsC, "d")
	dropped := func() float64 {
		return hs.pluginMetric("informer_host_plugin_metrics_dropped_total", map[string]string{"plugin": "metrics.wasm"})
	}
	eventually(t, "the update past the cap dropped", func() bool { return dropped() == 1 })
	if v := byNS(nsC); v != -1 {
		t.Errorf("a series past the cap is exported: %v", v)
	}
	if v := hs.pluginMetric("informer_host_plugin_metrics_series", map[string]string{"plugin": "metrics.wasm"}); v != 3 {
		t.Errorf("series = %v, want 3", v)
	}

	// Reload: a new file with the same declarations. The new version is
	// handed the cache again (4 objects); counts go on from where they
	// were instead of starting over.
	v2 := append(append([]byte(nil), wasm...), 0, 5, 3, 'v', '2', 'x', 0) // a custom section: new bytes, same module
	hs.write("metrics.wasm", v2)
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "metrics.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version to replay the cache", func() bool {
		st := hs.status("metrics.wasm")
		return st.SHA256 == sha(v2) && st.Synced && byNS(hs.ns) == 4 && byNS(nsB) == 2
	})
	if v := dropped(); v != 2 {
		t.Errorf("dropped after the replay = %v, want 2 (nsC's object, once per version)", v)
	}

	// Removal forgets the plugin's series.
	hs.h.Unload("metrics.wasm")
	if v := byNS(hs.ns); v != -1 {
		t.Errorf("after unload the plugin still exports %v", v)
	}
	if v := dropped(); v != -1 {
		t.Errorf("after unload dropped_total is still exported: %v", v)
	}
}
