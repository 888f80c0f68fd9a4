package host

import (
	"context"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCacheReadGrantedAndDenied runs one plugin twice against the real
// apiserver: granted the cache of "cms", it reads ConfigMap "target" from
// the host's cache and lists the labelled ones; not granted, every cache
// call returns ERR_DENIED (-8), the plugin goes on running, the host logs
// the denial once per function (not once per call) and counts every call.
func TestCacheReadGrantedAndDenied(t *testing.T) {
	plugin := testPlugin(t, "cacheread")
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
- {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
  modules:
  - file: granted.wasm
    grants:
      cache: [{resource: cms}]
  - file: denied.wasm
`, map[string][]byte{"granted.wasm": plugin, "denied.wasm": plugin})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"target", "other"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "x"}}, Data: map[string]string{"v": "hello-" + name}}
		if _, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hs.createCM("trigger", nil)
	eventually(t, "the granted plugin to read target and list both labelled ConfigMaps from the cache", func() bool {
		return len(hs.logs.lines("plugin=granted.wasm", "get=hello-target")) > 0 && len(hs.logs.lines("plugin=granted.wasm", "list=2")) > 0
	})
	eventually(t, "the denied plugin to handle all three events", func() bool {
		return len(hs.logs.lines("plugin=denied.wasm", "get=-8")) >= 3 && len(hs.logs.lines("plugin=denied.wasm", "list=-8")) >= 3
	})
	if l := hs.logs.lines("plugin=denied.wasm", "host function call denied"); len(l) != 2 {
		t.Errorf("denial logged %d times, want once per function (cache_get, cache_list):\n%v", len(l), l)
	}
	if l := hs.logs.lines("plugin=granted.wasm", "denied"); len(l) != 0 {
		t.Errorf("granted plugin denied:\n%v", l)
	}
	var m dto.Metric
	if err := hs.h.metrics.denied.WithLabelValues("denied.wasm", "cache").Write(&m); err != nil {
		t.Fatal(err)
	}
	if v := m.GetCounter().GetValue(); v < 6 {
		t.Errorf("informer_host_plugin_denied_total{plugin=denied.wasm,capability=cache} = %v, want every call counted (>= 6)", v)
	}
	if l := hs.logs.lines("plugin=denied.wasm", "imports functions of a capability it is not granted", "capability=cache"); len(l) != 1 {
		t.Errorf("load warning about the ungranted capability: %v", l)
	}
	for file, granted := range map[string][]string{"granted.wasm": {"cache"}, "denied.wasm": nil} {
		s := hs.status(file)
		if !slices.Equal(s.Requested, []string{"cache"}) || !slices.Equal(s.Granted, granted) || s.State != StateRunning {
			t.Errorf("%s: status requested %v granted %v state %s; want [cache], %v, running", file, s.Requested, s.Granted, s.State, granted)
		}
	}
}
