package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/host/replay"
	"github.com/informer-host/informer-host/internal/controllerwrites"
)

// TestRecordControllerExamples is TestRecordCapabilitiesIIExamples for
// the controller examples (ABI.md section 18) and configmap-copy's
// event-mode twin: each runs live against the control plane on its own
// workload, its stream (reconcile lines with what each call gave the
// host) and what its calls got are recorded, and the replay of that
// stream, with the recorded stubs in place of the cluster, gives the same
// results, children sets, statuses and requeue-afters, and makes every
// call the live run made, no more. With INFORMER_HOST_WRITE_RECORDINGS=1
// (make example-recordings) it writes the recordings, their config.json
// and stubs.json to plugins/examples/<name>/testdata.
func TestRecordControllerExamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		// config is the example's config.yaml for the run: NS is the
		// test's namespace, DST a second one.
		config string
		// before makes the initial list; run the workload.
		before func(t *testing.T, ns string)
		run    func(t *testing.T, lr *liveRun, dst string)
		// calls is the host function the live run must have called, and
		// the replay with it from the recording: the example's work.
		calls string
	}{
		{name: "configmap-copy", calls: "children_apply", run: copyWorkload, config: copyResources + `
plugins:
  directory: DIR
  modules:
  - file: configmap-copy.wasm
    config: {to: DST}
    controller: {for: configmaps-src, owns: [configmaps-dst]}
    grants:
      writes:
        resources: [{resource: configmaps-dst, verbs: [apply, delete]}]
`},
		{name: "configmap-copy-events", calls: "k8s_write", run: copyWorkload, config: copyResources + `
plugins:
  directory: DIR
  modules:
  - file: configmap-copy-events.wasm
    config: {to: DST}
    bindings:
    - {resource: configmaps-src, events: [add, update, delete]}
    - {resource: configmaps-dst, events: [update, delete]}
    grants:
      cache: [{resource: configmaps-src}, {resource: configmaps-dst}]
      writes:
        resources: [{resource: configmaps-dst, verbs: [apply, delete]}]
`},
		{name: "cronjob", calls: "status_apply", before: cronJobBefore, run: cronJobWorkload, config: `
apiVersion: informer-host/v1
resources:
- {name: cronjobs, group: batch.tutorial.kubebuilder.io, version: v1, resource: cronjobs, namespaces: [NS]}
- {name: jobs, group: batch, version: v1, resource: jobs, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
  - file: cronjob.wasm
    controller: {for: cronjobs, owns: [jobs]}
    grants:
      cache: [{resource: jobs, indexes: [owner]}]
      writes:
        resources:
        - {resource: jobs, verbs: [apply, delete]}
        - {resource: cronjobs, verbs: [apply], subresources: [status]}
`},
		{name: "service-per-pod-rs", calls: "children_apply", before: servicePerPodBefore, run: servicePerPodWorkload, config: servicePerPodConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin := tc.name + ".wasm"
			if tc.name == "cronjob" {
				installCronJobCRD(t)
			}
			dst := controlPlane(t).Namespace(t)
			var before func(string)
			if tc.before != nil {
				before = func(ns string) { tc.before(t, ns) }
			}
			lr := startRecording(t, strings.ReplaceAll(tc.config, "DST", dst), map[string][]byte{plugin: example(t, tc.name)}, before)
			tc.run(t, lr, dst)
			recs := lr.stop()
			rec := recs[plugin]
			if rec == nil || len(rec.Lines) == 0 {
				t.Fatal("nothing recorded")
			}
			cfgJSON, _ := lr.cfg.ConfigJSON(plugin)
			stubFile, stubs := recordedStubs(t, lr, plugin)
			rep, err := replay.Run(context.Background(), replay.Options{Plugin: plugin, Wasm: example(t, tc.name), Events: rec, Config: cfgJSON, Stubs: stubs})
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Counts
			if c.Events < 3 || c.OK != c.Events || c.Mismatches+c.Failures+c.UnstubbedCalls+c.RepeatedCalls+len(rep.MissingStubs) != 0 {
				t.Errorf("replay counts %+v, stubs missing %+v", c, rep.MissingStubs)
			}
			for _, u := range rep.UnusedStubs {
				if !u.Retry {
					t.Errorf("stubs[%d] (%s) unused: the live run made a call the replay did not", u.Index, replay.Describe(u.Function, u.Request))
				}
			}
			calls, reconciles := 0, 0
			for _, s := range rep.Steps {
				if len(s.Differs) > 0 {
					t.Errorf("step %d (%s): %q", s.Seq, s.Event, s.Differs)
				}
				if s.Call == "ih_reconcile" {
					reconciles++
				}
				for _, call := range s.Calls {
					if call.Function == tc.calls && call.Stubbed && call.Code == 0 {
						calls++
					}
				}
			}
			if calls == 0 || (tc.calls != "k8s_write") != (reconciles > 0) {
				t.Errorf("the replay made %d %s calls answered as live and %d reconciles\nstubs:\n%s", calls, tc.calls, reconciles, stubFile.Bytes())
			}
			if t.Failed() {
				for _, s := range rep.Steps {
					t.Logf("%d %s %s: %s %q %q", s.Seq, s.Call, s.Event, s.Result, s.Recorded, s.Differs)
					for _, c := range s.Calls {
						if c.Stubbed || c.Extra != "" {
							t.Logf("    %s %s -> %d %s", c.Function, c.Request, c.Code, c.Extra)
						}
					}
				}
				for _, l := range rec.Lines {
					u := unstructured.Unstructured{Object: l.Object}
					t.Logf("line %s %s %s/%s@%s labels=%v", l.Type, l.Resource, u.GetNamespace(), u.GetName()+l.Name, u.GetResourceVersion(), u.GetLabels())
				}
				t.Logf("stubs:\n%s", stubFile.Bytes())
				return
			}
			if os.Getenv("INFORMER_HOST_WRITE_RECORDINGS") == "1" {
				writeRecording(t, lr, tc.name, cfgJSON)
				if err := os.WriteFile(filepath.Join("..", "plugins", "examples", tc.name, "testdata", "stubs.json"), stubFile.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// copyResources are both configmap-copy examples' resources: the
// sources, in the test's namespace, and the copies, in DST.
const copyResources = `
apiVersion: informer-host/v1
resources:
- {name: configmaps-src, version: v1, resource: configmaps, namespaces: [NS], labelSelector: sync=true}
- {name: configmaps-dst, version: v1, resource: configmaps, namespaces: [DST]}`

// copyWorkload makes configmap-copy's work: two sources copied, one
// changed, its copy changed by hand (and made right again), the other
// source deleted (and its copy with it).
func copyWorkload(t *testing.T, lr *liveRun, dst string) {
	ctx := context.Background()
	src, dsts := env.Client.CoreV1().ConfigMaps(lr.ns), env.Client.CoreV1().ConfigMaps(dst)
	copied := func(name, key, value string) {
		eventually(t, "the copy of "+name+" with "+key+"="+value, func() bool {
			cm, err := dsts.Get(ctx, name, metav1.GetOptions{})
			return err == nil && cm.Data[key] == value
		})
	}
	for name, data := range map[string]string{"a": "1", "b": "2"} {
		if _, err := src.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sync": "true"}},
			Data: map[string]string{"x": data}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		copied(name, "x", data)
	}
	// setX sets data.x of the ConfigMap name through cms.
	setX := func(cms typedcorev1.ConfigMapInterface, name, value string) {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["x"] = value
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setX(src, "a", "3")
	copied("a", "x", "3")
	setX(dsts, "a", "by hand")
	copied("a", "x", "3")
	if err := src.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the copy of b deleted", func() bool {
		_, err := dsts.Get(ctx, "b", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

var cronJobsGVR = schema.GroupVersionResource{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Resource: "cronjobs"}

// installCronJobCRD installs the cronjob example's crd.yaml, once per
// control plane, and waits until CronJobs are served.
func installCronJobCRD(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "plugins", "examples", "cronjob", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = apiext.NewForConfigOrDie(controlPlane(t).Config).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	eventually(t, "CronJobs served", func() bool {
		_, err := dyn.Resource(cronJobsGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil
	})
}

// cronJobBefore makes the cronjob example's initial list: a suspended
// CronJob (its schedule never runs, so what the controller does depends
// on no clock, and the replay's clock gives the same answers) with one
// Job of a run it owns, which the controller adopts as a child.
func cronJobBefore(t *testing.T, ns string) {
	ctx := context.Background()
	cj, err := dynamic.NewForConfigOrDie(env.Config).Resource(cronJobsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
		"metadata": map[string]any{"name": "nightly"},
		"spec": map[string]any{"schedule": "0 0 * * *", "suspend": true, "successfulJobsHistoryLimit": int64(1),
			"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never", "containers": []any{map[string]any{"name": "c", "image": "x"}}}}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createRunJob(t, ns, cj, "nightly-1", "2026-12-01T00:00:00Z")
}

// createRunJob creates the Job of cj's run at scheduled, owned by cj.
// No Job controller runs in the test control plane: the Job stays as
// created, active.
func createRunJob(t *testing.T, ns string, cj *unstructured.Unstructured, name, scheduled string) {
	suspend := true
	if _, err := env.Client.BatchV1().Jobs(ns).Create(context.Background(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"batch.tutorial.kubebuilder.io/scheduled-at": scheduled},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cj.GetAPIVersion(), Kind: cj.GetKind(), Name: cj.GetName(), UID: cj.GetUID(), Controller: new(true)}}},
		Spec: batchv1.JobSpec{Suspend: &suspend, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cronJobWorkload: the controller adopts the first Job and reports it
// active; a second run's Job comes and is reported too; the CronJob is
// deleted, and the host prunes the Jobs it applied for it.
func cronJobWorkload(t *testing.T, lr *liveRun, _ string) {
	ctx := context.Background()
	cjs := dynamic.NewForConfigOrDie(env.Config).Resource(cronJobsGVR).Namespace(lr.ns)
	active := func(n int, last string) {
		eventually(t, "the CronJob's status to list "+last, func() bool {
			cj, err := cjs.Get(ctx, "nightly", metav1.GetOptions{})
			if err != nil {
				return false
			}
			a, _, _ := unstructured.NestedSlice(cj.Object, "status", "active")
			ts, _, _ := unstructured.NestedString(cj.Object, "status", "lastScheduleTime")
			jobs, err := env.Client.BatchV1().Jobs(lr.ns).List(ctx, metav1.ListOptions{LabelSelector: controllerwrites.LabelPlugin})
			return len(a) == n && ts == last && err == nil && len(jobs.Items) == n
		})
	}
	active(1, "2026-12-01T00:00:00Z")
	cj, err := cjs.Get(ctx, "nightly", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createRunJob(t, lr.ns, cj, "nightly-2", "2026-12-02T00:00:00Z")
	active(2, "2026-12-02T00:00:00Z")
	if err := cjs.Delete(ctx, "nightly", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted, each Job waits for the garbage collector (not running
	// here) to orphan its pods: the host's delete is what shows.
	eventually(t, "the CronJob's Jobs pruned", func() bool {
		jobs, err := env.Client.BatchV1().Jobs(lr.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
}

// servicePerPodBefore makes service-per-pod's initial list: a
// StatefulSet of two Pods, opted in, with kube-controller-manager making
// the Pods. They are there before the plugin first reads them: a Pod
// made while a call runs could land in the cache after the call read it
// and before its line is written, and the replay would read it where the
// live call did not (REPLAY.md, Recording).
func servicePerPodBefore(t *testing.T, ns string) {
	controlPlane(t).Controllers(t)
	if _, err := env.Client.AppsV1().StatefulSets(ns).Create(context.Background(), nginxStatefulSet(2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the StatefulSet's Pods", func() bool {
		l, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 2
	})
}

// servicePerPodWorkload is service-per-pod's test.sh in short: a
// Service per Pod and the Pods labelled, a scale down pruning one, and
// the delete (the plugin's finalizer) taking the rest.
func servicePerPodWorkload(t *testing.T, lr *liveRun, _ string) {
	ctx := context.Background()
	c, ns := env.Client, lr.ns
	services := func(want ...string) func() bool {
		return func() bool {
			l, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != len(want) {
				return false
			}
			for _, s := range l.Items {
				if !slices.Contains(want, s.Name) || s.Spec.Selector["pod-name"] != s.Name {
					return false
				}
			}
			return true
		}
	}
	eventually(t, "a Service per Pod", services("nginx-0", "nginx-1"))
	eventually(t, "the Pods labelled", func() bool {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "pod-name"})
		return err == nil && len(l.Items) == 2
	})
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "nginx", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scale down prunes nginx-1", services("nginx-0"))
	if err := c.AppsV1().StatefulSets(ns).Delete(ctx, "nginx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delete removes the Services, then the StatefulSet goes", func() bool {
		_, err := c.AppsV1().StatefulSets(ns).Get(ctx, "nginx", metav1.GetOptions{})
		return services()() && apierrors.IsNotFound(err)
	})
}
