package daemon

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
	"github.com/informer-host/informer-host/internal/tracing/tracingtest"
)

// With tracing: set, the daemon exports a trace per delivery, as
// service.name informer-host at its version, and flushes what is queued
// when it stops.
func TestDaemonTraces(t *testing.T) {
	ns := env.Namespace(t)
	col := tracingtest.New(t)
	cfg := writeDaemonConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat", "tracing:\n  endpoint: "+col.URL+"\n")
	r := startReplica(t, cfg, Options{Version: "v9.9.9"})
	delivered := func(name string) bool {
		for _, s := range col.Spans() {
			if s.ParentID == "" && s.Attrs["k8s.object.name"] == name && s.Name == "deliver cms add" {
				return s.Resource["service.name"] == "informer-host" && s.Resource["service.version"] == "v9.9.9"
			}
		}
		return false
	}
	create := func(name string) {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("first")
	testenv.Eventually(t, "the delivery of first to be exported", func() bool { return delivered("first") })
	create("last")
	testenv.Eventually(t, "counter to count every ConfigMap, last included", func() bool {
		l, err := env.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: testenv.SeenKeysSelector})
		return err == nil && r.last() == len(l.Items)
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !delivered("last") {
		t.Errorf("the delivery of last was not exported by the time the daemon stopped; spans: %+v", col.Spans())
	}
	if errs := col.Errors(); len(errs) > 0 {
		t.Errorf("collector: %v", errs)
	}
}
