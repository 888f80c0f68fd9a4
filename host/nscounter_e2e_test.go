package host

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// The ns-counter example exports pods per namespace and phase; a reload
// and a trap in the middle of churn leave the gauges equal to the
// cluster's counts once it settles. Then every pod of one namespace goes
// while the plugin is down (each restart traps in its replay): the
// replay has nothing of that namespace, and only the plugin's state says
// its gauges were exported, so only state brings them to 0.
func TestExampleNsCounter(t *testing.T) {
	wasm := example(t, "ns-counter")
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, kind: Pod, namespaces: [NS, NS-b]}
plugins:
  directory: DIR
  modules:
    - file: ns-counter.wasm
      bindings: [{resource: pods}]
      grants: {metrics: {}, state: {}}
      config: {crashOn: crash, holdOn: hold}
      # parkAfter 0: the anchor must hold the plugin down, trapping
      # every restart's replay, rather than be parked after 3 traps.
      limits: {restartBackoff: 10ms, maxRestartBackoff: 100ms, maxConsecutiveFailures: 1000, parkAfter: 0}
`, map[string][]byte{"ns-counter.wasm": wasm})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nss := []string{hs.ns, hs.ns + "-b"}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[1]}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx, nss[1], metav1.DeleteOptions{}) })
	newPod := func(ns, name string, phase corev1.PodPhase) error {
		p, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
		if err != nil || phase == corev1.PodPending {
			return err
		}
		p.Status.Phase = phase
		_, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}
	// An anchor pod per namespace, never deleted.
	for _, ns := range nss {
		if err := newPod(ns, "anchor", corev1.PodRunning); err != nil {
			t.Fatal(err)
		}
	}

	// Churn: pods created in rotating phases, the older ones deleted.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	churnErr := make(chan error, 1)
	wg.Go(func() {
		phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ns := nss[i%2]
			if err := newPod(ns, fmt.Sprintf("p-%d", i), phases[i%len(phases)]); err != nil {
				churnErr <- err
				return
			}
			if i >= 6 {
				old := fmt.Sprintf("p-%d", i-6)
				if err := env.Client.CoreV1().Pods(nss[(i-6)%2]).Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
					churnErr <- err
					return
				}
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	running := func(b []byte) func() bool {
		return func() bool {
			st := hs.status("ns-counter.wasm")
			return st.SHA256 == sha(b) && st.State == StateRunning
		}
	}
	// Some churn, then a reload.
	eventually(t, "pods counted", func() bool { return hs.status("ns-counter.wasm").Counters.Delivered >= 20 })
	v2 := append(append([]byte(nil), wasm...), 0, 5, 3, 'v', '2', 'x', 0)
	hs.write("ns-counter.wasm", v2)
	if err := hs.h.Load(ctx, filepath.Join(hs.dir, "ns-counter.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version running", running(v2))
	// More churn, then a trap: the anchor's update makes the plugin panic.
	delivered := hs.status("ns-counter.wasm").Counters.Delivered
	eventually(t, "more pods counted", func() bool { return hs.status("ns-counter.wasm").Counters.Delivered >= delivered+20 })
	anchor, err := env.Client.CoreV1().Pods(nss[0]).Get(ctx, "anchor", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	anchor.Annotations = map[string]string{"crash": "now"}
	if _, err := env.Client.CoreV1().Pods(nss[0]).Update(ctx, anchor, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a trap and a restart", func() bool {
		st := hs.status("ns-counter.wasm")
		return st.Counters.Traps >= 1 && st.Counters.Restarts >= 1 && st.State == StateRunning
	})
	delivered = hs.status("ns-counter.wasm").Counters.Delivered
	eventually(t, "churn after the restart", func() bool { return hs.status("ns-counter.wasm").Counters.Delivered >= delivered+20 })
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	select {
	case err := <-churnErr:
		t.Fatal(err)
	default:
	}

	// The plugin down: the anchor's annotation traps every instance in its
	// replay, before it is synced. Meanwhile every pod of the second
	// namespace goes, and the host's cache sees it.
	traps := hs.status("ns-counter.wasm").Counters.Traps
	setAnnotations := func(a map[string]string) {
		t.Helper()
		anchor, err := env.Client.CoreV1().Pods(nss[0]).Get(ctx, "anchor", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		anchor.Annotations = a
		if _, err := env.Client.CoreV1().Pods(nss[0]).Update(ctx, anchor, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setAnnotations(map[string]string{"hold": "down"})
	eventually(t, "the plugin down", func() bool { return hs.status("ns-counter.wasm").Counters.Traps > traps })
	if err := env.Client.CoreV1().Pods(nss[1]).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache without pods in "+nss[1], func() bool {
		n := 0
		hs.p.CacheList("pods", nss[1], labels.Everything(), func(*unstructured.Unstructured) { n++ })
		return n == 0
	})
	if hs.status("ns-counter.wasm").Synced {
		t.Fatal("the plugin synced while the anchor holds it down")
	}
	setAnnotations(nil)
	eventually(t, "the plugin back and synced", func() bool {
		st := hs.status("ns-counter.wasm")
		return st.State == StateRunning && st.Synced
	})

	// The cluster's counts, and what /metrics says.
	want := map[string]float64{}
	for _, ns := range nss {
		list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			phase := string(p.Status.Phase)
			if phase == "" {
				phase = "Unknown"
			}
			want[ns+"/"+phase]++
		}
	}
	exported := func() map[string]float64 {
		got := map[string]float64{}
		mf := hs.gather()["informer_host_plugin_metric_pods"]
		if mf == nil {
			return got
		}
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["plugin"] == "ns-counter.wasm" && m.GetGauge().GetValue() != 0 {
				got[l["namespace"]+"/"+l["phase"]] = m.GetGauge().GetValue()
			}
		}
		return got
	}
	var last map[string]float64
	defer func() {
		if t.Failed() {
			t.Logf("exported pod counts\n got %v\nwant %v (the cluster's)", last, want)
		}
	}()
	eventually(t, "the gauges to equal the cluster's counts", func() bool { last = exported(); return maps.Equal(last, want) })
}
