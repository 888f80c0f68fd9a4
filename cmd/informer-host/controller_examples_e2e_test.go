package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The kubebuilder book's CronJob as the cronjob example plugin, end to
// end: its CRD installed, a CronJob scheduled every minute gets, at its
// first minute tick, a Job the plugin applied as its child (controller
// ownerReference to the CronJob), and the CronJob's status (through the
// status subresource) lists it as active with lastScheduleTime set;
// kube-controller-manager's Job controller then makes the Job's Pod.
// There is no kubelet, so the Pod stays Pending and the Job never
// completes: completion, history limits and concurrency policies are the
// example's kittest tests, on a fake clock.
func TestCronJobExampleRunsAMinuteTick(t *testing.T) {
	env.Require(t)
	env.Controllers(t)
	bin := ctlBinary(t)
	ns := env.Namespace(t)
	installCRD(t, "../../plugins/examples/cronjob/crd.yaml")
	cfg := ctlConfig(t, map[string][]byte{"cronjob.wasm": examplePlugin(t, "cronjob")}, exampleConfig(t, "cronjob", ns))
	startCtl(t, bin, cfg, 1)

	gvr := schema.GroupVersionResource{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Resource: "cronjobs"}
	cronjobs := dynamic.NewForConfigOrDie(env.Config).Resource(gvr).Namespace(ns)
	cj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
		"metadata": map[string]any{"name": "every-minute"},
		"spec": map[string]any{
			"schedule": "* * * * *",
			"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "OnFailure",
				"containers":    []any{map[string]any{"name": "hello", "image": "busybox", "args": []any{"date"}}},
			}}}},
		},
	}}
	cj, err := cronjobs.Create(context.Background(), cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The first tick is within a minute; the deadline is
	// EventuallyTimeout's (two), which only detects a hang.
	var job batchv1.Job
	waitFor(t, "a Job of the CronJob's first tick", func() (bool, string) {
		list, err := env.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range list.Items {
			names = append(names, j.Name)
			if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == cj.GetUID() && ref.Kind == "CronJob" {
				job = j
				return true, ""
			}
		}
		return false, fmt.Sprintf("Jobs %v, none controlled by the CronJob", names)
	})
	waitFor(t, "the CronJob's status: the Job active, lastScheduleTime set", func() (bool, string) {
		got, err := cronjobs.Get(context.Background(), "every-minute", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last, _, _ := unstructured.NestedString(got.Object, "status", "lastScheduleTime")
		active, _, _ := unstructured.NestedSlice(got.Object, "status", "active")
		if _, err := time.Parse(time.RFC3339, last); err != nil {
			return false, fmt.Sprintf("status %v", got.Object["status"])
		}
		for _, a := range active {
			if m, ok := a.(map[string]any); ok && m["name"] == job.Name && m["kind"] == "Job" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %v, want %s active", got.Object["status"], job.Name)
	})
	waitFor(t, "the Job controller's Pod for the Job (Pending: no kubelet)", func() (bool, string) {
		pods, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == job.UID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Pods, none of Job %s", len(pods.Items), job.Name)
	})
}

// installCRD creates the CustomResourceDefinition of the file path
// (kept if a test before made it: they are cluster-wide) and waits until
// it is established.
func installCRD(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(context.Background(), &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, "CRD "+crd.Name+" established", func() (bool, string) {
		got, err := crds.Get(context.Background(), crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v", got.Status.Conditions)
	})
}

// exampleConfig is the config.yaml of the example plugin name as it
// ships, its resources watched in namespace ns only (the test's) and
// its plugin read from the daemon's directory "plugins".
func exampleConfig(t *testing.T, name, ns string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../plugins/examples", name, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	// Resources written as flow mappings ("  - {name: …}") and as blocks
	// (a "    resource: …" line).
	text = regexp.MustCompile(`(?m)^(  - \{name: .*)\}$`).ReplaceAllString(text, "${1}, namespaces: ["+ns+"]}")
	text = regexp.MustCompile(`(?m)^(    resource: .*)$`).ReplaceAllString(text, "${1}\n    namespaces: ["+ns+"]")
	if strings.Count(text, "namespaces: ["+ns+"]") < 2 {
		t.Fatalf("%s/config.yaml: could not restrict its resources to the test's namespace:\n%s", name, text)
	}
	return strings.Replace(text, "\nplugins:\n", "\nplugins:\n  directory: plugins\n", 1)
}

// serviceNames lists the Services of ns, sorted.
func serviceNames(t *testing.T, ns string) []string {
	t.Helper()
	list, err := env.Client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// Metacontroller's service-per-pod DecoratorController as the
// service-per-pod-rs example plugin (Rust), with the real StatefulSet
// controller: an annotated StatefulSet's Pods (created by
// kube-controller-manager; Pending, there is no kubelet, but they exist)
// get the label the Services select on, and the StatefulSet one Service
// per Pod, each with the StatefulSet as its controller; scaling down
// prunes the extra Services, removing the annotation removes them all,
// and deleting the StatefulSet waits for its finalizer, which the host
// removes once the plugin has cleaned up.
func TestServicePerPodExample(t *testing.T) {
	env.Require(t)
	env.Controllers(t)
	bin := ctlBinary(t)
	ns := env.Namespace(t)
	const finalizer = "service-per-pod.informer-host.io/cleanup" // config.yaml's
	cfg := ctlConfig(t, map[string][]byte{"service-per-pod-rs.wasm": examplePlugin(t, "service-per-pod-rs")}, exampleConfig(t, "service-per-pod-rs", ns))
	startCtl(t, bin, cfg, 1)

	ctx := context.Background()
	sets := env.Client.AppsV1().StatefulSets(ns)
	labels := map[string]string{"app": "web"}
	_, err := sets.Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			"service-per-pod-label": "pod-name",
			"service-per-pod-ports": "80:8080",
		}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			ServiceName:         "web",
			PodManagementPolicy: appsv1.ParallelPodManagement, // OrderedReady would wait for web-0 to run, which needs a kubelet
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := sets.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// wantServices waits until the Services are exactly one per ordinal
	// below replicas, each selecting its Pod on ports 80:8080 with the
	// StatefulSet as controller.
	wantServices := func(what string, replicas int) {
		t.Helper()
		waitFor(t, what, func() (bool, string) {
			list, err := env.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var problems []string
			seen := map[string]bool{}
			for _, s := range list.Items {
				seen[s.Name] = true
				ord := -1
				fmt.Sscanf(strings.TrimPrefix(s.Name, "web-"), "%d", &ord)
				switch ref := metav1.GetControllerOf(&s); {
				case ord < 0 || ord >= replicas:
					problems = append(problems, "extra "+s.Name)
				case s.Spec.Selector["pod-name"] != s.Name:
					problems = append(problems, fmt.Sprintf("%s selects %v", s.Name, s.Spec.Selector))
				case len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].TargetPort.IntValue() != 8080:
					problems = append(problems, fmt.Sprintf("%s ports %v", s.Name, s.Spec.Ports))
				case ref == nil || ref.UID != set.UID:
					problems = append(problems, fmt.Sprintf("%s controller %v", s.Name, ref))
				}
			}
			for i := range replicas {
				if !seen[fmt.Sprintf("web-%d", i)] {
					problems = append(problems, fmt.Sprintf("missing web-%d", i))
				}
			}
			return len(problems) == 0, strings.Join(problems, "; ")
		})
	}

	waitFor(t, "the StatefulSet controller's 3 Pods, labelled by the plugin", func() (bool, string) {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		ok := 0
		for _, p := range pods.Items {
			got = append(got, fmt.Sprintf("%s(pod-name=%s,%s)", p.Name, p.Labels["pod-name"], p.Status.Phase))
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == set.UID && p.Labels["pod-name"] == p.Name {
				ok++
			}
		}
		return ok == 3, fmt.Sprintf("Pods %v", got)
	})
	wantServices("one Service per Pod", 3)
	waitFor(t, "the finalizer on the StatefulSet", func() (bool, string) {
		s, err := sets.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(s.Finalizers, finalizer), fmt.Sprintf("finalizers %v", s.Finalizers)
	})

	update := func(edit func(*appsv1.StatefulSet)) {
		t.Helper()
		for {
			s, err := sets.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			edit(s)
			if _, err = sets.Update(ctx, s, metav1.UpdateOptions{}); err == nil {
				return
			} else if !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
	}
	update(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	wantServices("the Services of the Pods scaled away pruned", 1)

	update(func(s *appsv1.StatefulSet) { delete(s.Annotations, "service-per-pod-label") })
	waitFor(t, "every Service gone once the annotation is removed", func() (bool, string) {
		names := serviceNames(t, ns)
		return len(names) == 0, fmt.Sprintf("Services %v", names)
	})

	if err := sets.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the StatefulSet gone (its finalizer removed after the cleanup reconcile)", func() (bool, string) {
		s, err := sets.Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return false, fmt.Sprintf("finalizers %v", s.Finalizers)
	})
}
