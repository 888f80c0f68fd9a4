package host

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host/replay"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
)

// liveRun is a host run against the control plane whose plugins' streams
// are recorded.
type liveRun struct {
	t    *testing.T
	ns   string
	cfg  *config.Config
	h    *Host
	rec  *Recorder
	logs *logs
}

// startRecording starts a pipeline and a recording host on cfgYAML (NS and
// DIR replaced) with plugins in its directory. before runs once the
// namespace exists and before anything starts (objects it creates are the
// initial list).
func startRecording(t *testing.T, cfgYAML string, plugins map[string][]byte, before func(ns string)) *liveRun {
	t.Helper()
	lr := &liveRun{t: t, ns: controlPlane(t).Namespace(t), rec: &Recorder{}, logs: &logs{}}
	dir := t.TempDir()
	for name, b := range plugins {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(strings.NewReplacer("NS", lr.ns, "DIR", dir).Replace(cfgYAML)))
	if err != nil {
		t.Fatal(err)
	}
	lr.cfg = cfg
	if before != nil {
		before(lr.ns)
	}
	log := slog.New(slog.NewTextHandler(lr.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := informer.New(informer.Options{RESTConfig: env.Config, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.Apply(context.Background(), cfg.Resources); err != nil {
		t.Fatal(err)
	}
	writes, err := NewWritesClient(env.Config, p, log)
	if err != nil {
		t.Fatal(err)
	}
	if lr.h, err = NewRecording(context.Background(), Options{Pipeline: p, Config: cfg, Logger: log, CacheDir: "-",
		RESTConfig: env.Config, Writes: writes}, lr.rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", lr.logs.String())
		}
	})
	for name := range plugins {
		if err := lr.rec.Watch(lr.h, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := lr.h.LoadDir(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every plugin synced", func() bool {
		for _, s := range lr.h.Status() {
			if !s.Synced {
				return false
			}
		}
		return true
	})
	return lr
}

// stop drains the host and returns each plugin's recording.
func (lr *liveRun) stop() map[string]*replay.Recording {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lr.h.Stop(ctx)
	lr.rec.Stop()
	out := map[string]*replay.Recording{}
	for _, name := range lr.rec.Plugins() {
		var buf bytes.Buffer
		if err := lr.rec.Write(name, &buf); err != nil {
			lr.t.Fatal(err)
		}
		r, err := replay.Read(name, &buf)
		if err != nil {
			lr.t.Fatal(err)
		}
		out[name] = r
	}
	return out
}

func (lr *liveRun) pod(name string, phase corev1.PodPhase) *corev1.Pod {
	lr.t.Helper()
	ctx := context.Background()
	p, err := env.Client.CoreV1().Pods(lr.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err == nil && phase != corev1.PodPending {
		p.Status.Phase = phase
		p, err = env.Client.CoreV1().Pods(lr.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	}
	if err != nil {
		lr.t.Fatal(err)
	}
	return p
}

// A live run of ns-counter (state and metrics), recorded, replayed into
// the same plugin: the same result for every event and the same final
// state and metrics.
func TestRecordThenReplayGivesTheLiveRun(t *testing.T) {
	wasm := example(t, "ns-counter")
	var lr *liveRun
	lr = startRecording(t, `
apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, kind: Pod, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
    - file: ns-counter.wasm
      bindings: [{resource: pods}]
      grants: {metrics: {}, state: {}}
`, map[string][]byte{"ns-counter.wasm": wasm}, func(ns string) {
		for _, name := range []string{"p0", "p1"} {
			_, err := env.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	p2 := lr.pod("p2", corev1.PodPending)
	lr.pod("p3", corev1.PodRunning)
	p2.Status.Phase = corev1.PodSucceeded
	if _, err := env.Client.CoreV1().Pods(lr.ns).UpdateStatus(context.Background(), p2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Pods(lr.ns).Delete(context.Background(), "p0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Pending": "1", "Running": "1", "Succeeded": "1"}
	eventually(t, "the gauges to count the pods", func() bool {
		text := replay.MetricsText(lr.h.PluginMetrics())
		for phase, n := range want {
			if !strings.Contains(text, `namespace="`+lr.ns+`",phase="`+phase+`",plugin="ns-counter.wasm"} `+n+"\n") {
				return false
			}
		}
		return true
	})
	// The host forgets a plugin's metrics when it stops, so they are
	// taken once the gauges count the pods (ns-counter's ih_shutdown
	// changes none).
	liveMetrics := replay.MetricsText(lr.h.PluginMetrics())
	recs := lr.stop()
	liveState := map[string]string{}
	b, _ := lr.h.state.Lookup("ns-counter.wasm")
	var keys []string
	b.List(nil, nil, 1<<20, func(k string) bool { keys = append(keys, k); return true })
	for _, k := range keys {
		v, _, _ := b.Get([]byte(k))
		liveState[k] = string(v)
	}

	rec := recs["ns-counter.wasm"]
	if rec == nil || len(rec.Lines) < 6 {
		t.Fatalf("recording too short: %+v", rec)
	}
	cfgJSON, _ := lr.cfg.ConfigJSON("ns-counter.wasm")
	rep, err := replay.Run(context.Background(), replay.Options{Plugin: "ns-counter.wasm", Wasm: wasm, Events: rec, Config: cfgJSON})
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, s := range rep.Steps {
		if s.Recorded != "" {
			compared++
			if s.Recorded != s.Result {
				t.Errorf("step %d %s: replay %s, live %s", s.Seq, s.Event, s.Result, s.Recorded)
			}
		}
	}
	if compared != rep.Counts.Events || compared < 5 {
		t.Errorf("%d results compared of %d events", compared, rep.Counts.Events)
	}
	if !maps.Equal(rep.State, liveState) || len(liveState) == 0 {
		t.Errorf("final state: replay %v, live %v", rep.State, liveState)
	}
	if rep.Metrics != liveMetrics {
		t.Errorf("final metrics differ:\nreplay:\n%s\nlive:\n%s", rep.Metrics, liveMetrics)
	}
}
