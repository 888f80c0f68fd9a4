package host

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

const writerConfig = `
apiVersion: informer-host/v1
resources:
- {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
  - file: writer.wasm
    bindings: [{resource: configmaps, events: [add]}]
    config: {metadata: {labels: {written: "yes"}}}
    limits: {callTimeout: 50ms}
    grants:
      writes:
        resources: [{resource: configmaps, verbs: [patch]}]
        timeout: 5m
`

// A write whose apiserver answers ten times later than the plugin's call
// timeout succeeds: the wait is bounded by the writes timeout, not the
// CPU deadline. Then a host stop while a write waits returns ERR_CANCELED
// to the plugin (its answer, RETRY, is observed), and the call is no
// failure: no timeout, no trap.
func TestWriteSlowerThanCallTimeout(t *testing.T) {
	var proxy *testenv.SlowProxy
	hs, err := newHarness(t, writerConfig, map[string][]byte{"writer.wasm": fixture(t, "writer")}, func(hs *harness) {
		proxy, hs.writesRest = testenv.NewSlowProxy(t, env.Config)
	})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Delay.Store(int64(500 * time.Millisecond)) // 10× callTimeout
	hs.createCM("a", nil)
	labelled := func(name string) bool {
		cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && cm.Labels["written"] == "yes"
	}
	eventually(t, "the slow write to land", func() bool { return labelled("a") })
	eventually(t, "the plugin to log its write", func() bool { return len(hs.logs.lines("plugin=writer.wasm", "wrote")) == 1 })
	if c := hs.status("writer.wasm").Counters; c.Timeouts != 0 || c.Traps != 0 || c.OK != 1 {
		t.Fatalf("counters %+v: the network wait counted against the call timeout", c)
	}

	proxy.Delay.Store(int64(time.Hour))
	before := proxy.Writes.Load()
	hs.createCM("b", nil)
	eventually(t, "the write of b to be held by the apiserver", func() bool { return proxy.Writes.Load() > before })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hs.h.Halt(ctx)
	// A failed call would read "add ns/b timeout" (recorder): the
	// plugin returned, with RETRY, which it answers only to ERR_CANCELED.
	got := hs.rec.strings("writer.wasm")
	if last := got[len(got)-1]; last != "add "+hs.ns+"/b retry" {
		t.Fatalf("calls %q; want the held write's call to end with the plugin's RETRY (ERR_CANCELED)", got)
	}
	if labelled("b") {
		t.Fatal("b was written though its write was canceled")
	}
}

// dropSelfNoop: the plugin's merge patch sets only managedFields (a
// manager "x" owning the label), so its update, flagged as the plugin's
// own, differs from the old object in nothing the plugin sees (the cache
// strips managedFields): it is dropped (counted as unchanged), and the
// plugin is called once. Without dropSelfNoop it is delivered.
func TestDropSelfNoop(t *testing.T) {
	for _, drop := range []bool{true, false} {
		t.Run(map[bool]string{true: "dropped", false: "delivered"}[drop], func(t *testing.T) {
			cfg := strings.Replace(writerConfig, "events: [add]}]", "events: [add, update], dropSelfNoop: "+map[bool]string{true: "true", false: "false"}[drop]+"}]", 1)
			cfg = strings.Replace(cfg, "limits: {callTimeout: 50ms}", "", 1)
			cfg = strings.Replace(cfg, `config: {metadata: {labels: {written: "yes"}}}`, `config: {metadata: {managedFields: [{manager: x, operation: Apply, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {"f:metadata": {"f:labels": {"f:written": {}}}}}]}}`, 1)
			hs, err := newHarness(t, cfg, map[string][]byte{"writer.wasm": fixture(t, "writer")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"written": "yes"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The plugin's patch lands: manager x appears.
			eventually(t, "the plugin's managedFields on the object", func() bool {
				cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(context.Background(), "a", metav1.GetOptions{})
				if err != nil {
					return false
				}
				for _, m := range cm.ManagedFields {
					if m.Manager == "x" {
						return true
					}
				}
				return false
			})
			if drop {
				eventually(t, "the self no-op update dropped", func() bool {
					return hs.status("writer.wasm").Filtered["configmaps"].Unchanged == 1
				})
				if got := hs.rec.strings("writer.wasm"); len(got) != 1 || got[0] != "add "+hs.ns+"/a ok" {
					t.Fatalf("calls %q, want the add only", got)
				}
				return
			}
			eventually(t, "the self update delivered", func() bool { return len(hs.rec.strings("writer.wasm")) == 2 })
			if got := hs.rec.strings("writer.wasm"); got[1] != "update "+hs.ns+"/a ok" {
				t.Fatalf("calls %q", got)
			}
		})
	}
}

// The host's /metrics count and time each plugin's writes by verb,
// granted resource and result, from the writes client it was given.
func TestWriteMetrics(t *testing.T) {
	hs, err := newHarness(t, strings.Replace(writerConfig, "limits: {callTimeout: 50ms}", "", 1), map[string][]byte{"writer.wasm": fixture(t, "writer")})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("a", nil)
	ok := map[string]string{"plugin": "writer.wasm", "verb": "patch", "resource": "configmaps", "result": "ok"}
	eventually(t, "the write to be counted", func() bool { return hs.pluginMetric("informer_host_plugin_writes_total", ok) == 1 })
	mf := hs.gather()["informer_host_plugin_write_seconds"]
	if mf == nil || len(mf.Metric) != 1 || mf.Metric[0].GetHistogram().GetSampleCount() != 1 {
		t.Fatalf("informer_host_plugin_write_seconds %v, want one series with one write", mf)
	}
}

// Writes past the plugin's burst wait for their tokens, and the wait is
// I/O, not the plugin's CPU: at 4/s, burst 1, three events' writes each
// wait about five times the 50ms call timeout, and all of them land
// with no timeout, no error and nothing dropped.
func TestWritesOverTheRateLimitWait(t *testing.T) {
	cfg := strings.Replace(writerConfig, "timeout: 5m", "timeout: 5m\n        qps: 4\n        burst: 1", 1)
	hs, err := newHarness(t, cfg, map[string][]byte{"writer.wasm": fixture(t, "writer")})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c"}
	for _, n := range names {
		hs.createCM(n, nil)
	}
	ok := map[string]string{"plugin": "writer.wasm", "verb": "patch", "resource": "configmaps", "result": "ok"}
	eventually(t, "the three writes to land", func() bool { return hs.pluginMetric("informer_host_plugin_writes_total", ok) == 3 })
	for _, n := range names {
		cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil || cm.Labels["written"] != "yes" {
			t.Errorf("%s not written: %v", n, err)
		}
	}
	if c := hs.status("writer.wasm").Counters; c.OK != 3 || c.Errors != 0 || c.Timeouts != 0 || c.Retries != 0 {
		t.Fatalf("counters %+v; want three OK and no failure", c)
	}
}
