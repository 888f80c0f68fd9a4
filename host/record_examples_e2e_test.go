package host

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/host/replay"
)

// examples are the example plugins (plugins/examples), by file.
var examples = []string{"pod-logger", "pod-phases", "ns-counter", "owner-lookup", "counter-c", "minimal-wat",
	"pod-phase-rs", "pod-logger-as"}

// TestRecordExamples runs every example plugin on one workload against
// the control plane (a Deployment, its ReplicaSet, pods created, moved
// through phases and deleted), records each one's stream, and replays it
// into the same plugin: every result and every log line the plugin wrote
// live comes out of the replay the same, cache reads included
// (owner-lookup). With INFORMER_HOST_WRITE_RECORDINGS=1 (make
// example-recordings) it writes the recordings to
// plugins/examples/<name>/testdata/events.jsonl, which
// replay's TestExampleRecordings replays.
func TestRecordExamples(t *testing.T) {
	plugins := map[string][]byte{}
	for _, name := range examples {
		plugins[name+".wasm"] = example(t, name)
	}
	lr := startRecording(t, `
apiVersion: informer-host/v1
resources:
- {name: pods, version: v1, resource: pods, namespaces: [NS]}
- {name: replicasets, group: apps, version: v1, resource: replicasets, namespaces: [NS]}
- {name: deployments, group: apps, version: v1, resource: deployments, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: pods}]
  modules:
  - file: ns-counter.wasm
    bindings: [{resource: pods}]
    grants: {metrics: {}, state: {}}
  - file: owner-lookup.wasm
    bindings: [{resource: pods}]
    grants:
      cache:
      - {resource: pods, indexes: [owner]}
      - {resource: replicasets, indexes: [owner]}
      - {resource: deployments}
  - file: pod-phase-rs.wasm
    bindings: [{resource: pods}]
    grants: {cache: [{resource: pods}], state: {}, metrics: {}}
  - file: pod-logger-as.wasm
    bindings: [{resource: pods}]
    grants: {metrics: {}}
`, plugins, nil)
	ctx := context.Background()
	ns := lr.ns
	labels := map[string]string{"app": "web"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}
	dep, err := env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: new(bool)}}
	}
	rs, err := env.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Labels: labels, OwnerReferences: owner("Deployment", dep.Name, dep.UID)},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replicaset and deployment in the caches", func() bool {
		_, ok1 := lr.h.pipeline.CacheGet("replicasets", ns, rs.Name)
		_, ok2 := lr.h.pipeline.CacheGet("deployments", ns, dep.Name)
		return ok1 && ok2
	})
	// One change at a time, each waited for, so that what a cache read
	// sees live is what the recording's cache holds at that event.
	handled := func(what string) {
		n := len(lr.rec.Plugins())
		eventually(t, "every example to handle "+what, func() bool {
			lr.rec.mu.Lock()
			defer lr.rec.mu.Unlock()
			done := 0
			for _, s := range lr.rec.streams {
				if len(s.lines) > 0 && strings.Contains(fmt.Sprint(s.lines[len(s.lines)-1].Object["metadata"]), what) {
					done++
				}
			}
			return done == n
		})
	}
	var pods []*corev1.Pod
	for _, name := range []string{"web-abc-1", "web-abc-2", "web-abc-3"} {
		p, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			OwnerReferences: owner("ReplicaSet", rs.Name, rs.UID)}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		handled(p.ResourceVersion)
		pods = append(pods, p)
	}
	p := pods[0].DeepCopy()
	p.Status.Phase = corev1.PodRunning
	if p, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	handled(p.ResourceVersion)
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, pods[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	handled("web-abc-2")

	recs := lr.stop()
	for _, name := range examples {
		rec := recs[name+".wasm"]
		if rec == nil || len(rec.Lines) == 0 {
			t.Errorf("%s: nothing recorded", name)
			continue
		}
		cfgJSON, _ := lr.cfg.ConfigJSON(name + ".wasm")
		rep, err := replay.Run(ctx, replay.Options{Plugin: name + ".wasm", Wasm: plugins[name+".wasm"], Events: rec, Config: cfgJSON})
		if err != nil {
			t.Errorf("%s: replay: %v", name, err)
			continue
		}
		if rep.Counts.Mismatches != 0 || rep.Counts.Failures != 0 || rep.Counts.Events < 5 {
			t.Errorf("%s: replay counts %+v", name, rep.Counts)
		}
		if name == "owner-lookup" {
			// Its counts come from cache reads: the replay's cache is the
			// recording's.
			var logs []string
			for _, s := range rep.Steps {
				for _, l := range s.Logs {
					logs = append(logs, l.Message)
				}
			}
			for i := 1; i <= 3; i++ {
				want := fmt.Sprintf("deployment %s/web pods=%d (via replicaset web-abc, after add of web-abc-%d)", ns, i, i)
				if !strings.Contains(strings.Join(logs, "\n"), want) || len(lr.logs.lines("plugin=owner-lookup.wasm", want)) == 0 {
					t.Errorf("owner-lookup: %q not both live and in the replay; replay logs:\n%s", want, strings.Join(logs, "\n"))
				}
			}
		}
		if os.Getenv("INFORMER_HOST_WRITE_RECORDINGS") == "1" {
			writeRecording(t, lr, name, cfgJSON)
		}
	}
}

// capIIExamples are the examples that act outside the host (ABI.md §17),
// each with the one host function its recording's replay must see it
// call, answered as it was live.
var capIIExamples = map[string]replay.Stub{
	"label-enforcer":     {Function: "k8s_write", Code: 0},
	"crashloop-notifier": {Function: "http_request", Code: 204},
	"event-recorder":     {Function: "event_record", Code: 0},
	"team-labeler":       {Function: "k8s_write", Code: 0},
}

// TestRecordCapabilitiesIIExamples is TestRecordExamples for the examples
// that write, post and record Events: each runs live against the control
// plane (a real write, a loopback webhook, a real Event), its stream and
// what its calls got are recorded, and the replay of that stream, with
// the recorded stubs in place of the cluster, gives the same results and
// makes the same call, answered from the recording. With
// INFORMER_HOST_WRITE_RECORDINGS=1 it writes the recordings and their
// stubs.json.
func TestRecordCapabilitiesIIExamples(t *testing.T) {
	plugins := map[string][]byte{}
	for name := range capIIExamples {
		plugins[name+".wasm"] = example(t, name)
	}
	var posts atomic.Int32
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(webhook.Close)
	// team-labeler's owner chain, in the cache from the start: a
	// Deployment with a team and its ReplicaSet; their Pod p2 follows
	// (the others' resource selects only Pods not of app web, so no
	// other plugin writes it).
	var rs *appsv1.ReplicaSet
	ownerChain := func(ns string) {
		ctx := context.Background()
		dep, err := env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"team": "payments"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err = env.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-abc", OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", dep.Name, dep.UID)}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	lr := startRecording(t, strings.ReplaceAll(`
apiVersion: informer-host/v1
resources:
- {name: pods, version: v1, resource: pods, namespaces: [NS], labelSelector: "app!=web"}
- {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
- {name: team-pods, version: v1, resource: pods, namespaces: [NS], labelSelector: app=web}
- {name: replicasets, group: apps, version: v1, resource: replicasets, namespaces: [NS]}
- {name: deployments, group: apps, version: v1, resource: deployments, namespaces: [NS]}
upstreams:
- {name: webhook, url: "SRV", methods: [POST]}
plugins:
  directory: DIR
  modules:
  - file: label-enforcer.wasm
    bindings: [{resource: pods, events: [add, update]}]
    config: {key: team, value: unowned}
    grants:
      writes:
        resources: [{resource: pods, verbs: [apply]}]
  - file: crashloop-notifier.wasm
    bindings: [{resource: pods}]
    grants: {http: {upstreams: [webhook]}}
  - file: event-recorder.wasm
    bindings: [{resource: configmaps}]
    config: {maxBytes: 64}
    grants: {events: {}}
  - file: team-labeler.wasm
    bindings: [{resource: team-pods, events: [add, update]}]
    config: {pods: team-pods}
    grants:
      cache: [{resource: replicasets}, {resource: deployments}]
      writes:
        resources: [{resource: team-pods, verbs: [apply]}]
`, "SRV", webhook.URL), plugins, ownerChain)
	ctx := context.Background()
	ns := lr.ns
	caughtUp := func(plugin, rv string) {
		eventually(t, plugin+" to handle resourceVersion "+rv, func() bool {
			lr.rec.mu.Lock()
			defer lr.rec.mu.Unlock()
			s := lr.rec.streams[plugin+".wasm"]
			return s != nil && len(s.lines) > 0 && strings.Contains(fmt.Sprint(s.lines[len(s.lines)-1].Object["metadata"]), rv)
		})
	}
	pod, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "label-enforcer to label the pod", func() bool {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
		if err == nil {
			pod = p
		}
		return err == nil && p.Labels["team"] == "unowned"
	})
	teamPod, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p2", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "team-labeler to label its pod", func() bool {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "p2", metav1.GetOptions{})
		if err == nil {
			teamPod = p
		}
		return err == nil && p.Labels["team"] == "payments"
	})
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "x",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	if pod, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "crashloop-notifier to post", func() bool { return posts.Load() == 1 })
	// A small ConfigMap first: no Event for it, live or in the replay.
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Data: map[string]string{"x": "y"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Data: map[string]string{"x": strings.Repeat("x", 200)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "event-recorder's Event", func() bool {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=big"})
		return err == nil && len(evs.Items) > 0
	})
	caughtUp("label-enforcer", pod.ResourceVersion)
	caughtUp("team-labeler", teamPod.ResourceVersion)
	caughtUp("crashloop-notifier", pod.ResourceVersion)
	caughtUp("event-recorder", cm.ResourceVersion)

	recs := lr.stop()
	for name, stub := range capIIExamples {
		rec := recs[name+".wasm"]
		if rec == nil || len(rec.Lines) == 0 {
			t.Errorf("%s: nothing recorded", name)
			continue
		}
		cfgJSON, _ := lr.cfg.ConfigJSON(name + ".wasm")
		stubFile, stubs := recordedStubs(t, lr, name+".wasm")
		rep, err := replay.Run(ctx, replay.Options{Plugin: name + ".wasm", Wasm: plugins[name+".wasm"], Events: rec, Config: cfgJSON, Stubs: stubs})
		if err != nil {
			t.Errorf("%s: replay: %v", name, err)
			continue
		}
		if rep.Counts.Mismatches != 0 || rep.Counts.Failures != 0 || rep.Counts.Events < 2 || len(rep.MissingStubs) != 0 {
			t.Errorf("%s: replay counts %+v, stubs missing %+v", name, rep.Counts, rep.MissingStubs)
		}
		calls := 0
		for _, s := range rep.Steps {
			for _, c := range s.Calls {
				if c.Function == stub.Function && c.Code == stub.Code && c.Stubbed {
					calls++
				}
			}
		}
		if calls != 1 {
			t.Errorf("%s: the replay made %d %s calls answered %d from the recording, want the 1 it made live\nstubs:\n%s",
				name, calls, stub.Function, stub.Code, stubFile.Bytes())
		}
		if os.Getenv("INFORMER_HOST_WRITE_RECORDINGS") == "1" {
			writeRecording(t, lr, name, cfgJSON)
			if err := os.WriteFile(filepath.Join("..", "plugins", "examples", name, "testdata", "stubs.json"), stubFile.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// recordedStubs returns plugin's stub file as the recording writes it,
// and read back as the replay reads it.
func recordedStubs(t *testing.T, lr *liveRun, plugin string) (*bytes.Buffer, *replay.Stubs) {
	t.Helper()
	var stubFile bytes.Buffer
	if err := lr.rec.WriteStubs(plugin, &stubFile); err != nil {
		t.Fatal(err)
	}
	stubsPath := filepath.Join(t.TempDir(), "stubs.json")
	if err := os.WriteFile(stubsPath, stubFile.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	stubs, err := replay.ReadStubs(stubsPath)
	if err != nil {
		t.Fatalf("%s: the recorded stubs: %v\n%s", plugin, err, stubFile.Bytes())
	}
	return &stubFile, stubs
}

// writeRecording writes plugin name's recording (and its config, if any)
// to plugins/examples/<name>/testdata.
func writeRecording(t *testing.T, lr *liveRun, name string, cfgJSON []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := lr.rec.Write(name+".wasm", &buf); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "plugins", "examples", name, "testdata")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(cfgJSON) > 0 && string(cfgJSON) != "null" {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgJSON, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
