package host

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Metacontroller's service-per-pod (plugins/examples/service-per-pod-rs),
// its test.sh against the apiserver and kube-controller-manager: the
// StatefulSet controller makes the Pods, the plugin one Service per Pod
// and the Pods' label; scale down prunes, the annotation removed takes
// every Service away and put back brings them back, and a delete with
// another finalizer present removes the Services before the plugin's
// finalizer goes.
func TestServicePerPodE2E(t *testing.T) {
	env := controlPlane(t)
	env.Controllers(t)
	const fin = "service-per-pod.informer-host.io/cleanup"
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: statefulsets, group: apps, version: v1, resource: statefulsets, namespaces: [NS]}
  - {name: services, version: v1, resource: services, namespaces: [NS]}
  - {name: pods, version: v1, resource: pods, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
    - file: service-per-pod-rs.wasm
      controller:
        for: statefulsets
        owns: [services]
        watches:
          - resource: pods
            map: 'has(object.metadata.ownerReferences) ? object.metadata.ownerReferences.filter(r, r.kind == "StatefulSet" && has(r.controller) && r.controller).map(r, r.name) : []'
        finalizer: `+fin+`
      grants:
        cache: [{resource: pods, indexes: [owner]}]
        writes:
          resources:
            - {resource: services, verbs: [apply, delete]}
            - {resource: pods, verbs: [apply]}
            - {resource: statefulsets, verbs: [patch]}
`, map[string][]byte{"service-per-pod-rs.wasm": example(t, "service-per-pod-rs")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client
	ns := hs.ns
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Annotations: map[string]string{"service-per-pod-label": "pod-name", "service-per-pod-ports": "80:8080"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			PodManagementPolicy: appsv1.ParallelPodManagement, // no kubelet: an OrderedReady set would wait for nginx-0 forever
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			ServiceName:         "nginx",
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcSelector := func(name string) (string, bool) {
		s, err := c.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return s.Spec.Selector["pod-name"], true
	}
	gone := func(name string) func() bool {
		return func() bool { _, ok := svcSelector(name); return !ok }
	}
	eventually(t, "a Service per Pod", func() bool { v, _ := svcSelector("nginx-2"); return v == "nginx-2" })
	eventually(t, "the pod-name label on nginx-2", func() bool {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "nginx-2", metav1.GetOptions{})
		return err == nil && p.Labels["pod-name"] == "nginx-2"
	})
	s, _ := c.CoreV1().Services(ns).Get(ctx, "nginx-0", metav1.GetOptions{})
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != "nginx" || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("Service nginx-0: owners %+v ports %+v", s.OwnerReferences, s.Spec.Ports)
	}
	got, _ := c.AppsV1().StatefulSets(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if !slices.Contains(got.Finalizers, fin) {
		t.Errorf("finalizers %v, want %s", got.Finalizers, fin)
	}

	patch := func(p string, pt types.PatchType) {
		t.Helper()
		if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "nginx", pt, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"replicas":1}}`, types.MergePatchType)
	eventually(t, "scale down prunes nginx-1 and nginx-2", func() bool { return gone("nginx-1")() && gone("nginx-2")() })
	if v, _ := svcSelector("nginx-0"); v != "nginx-0" {
		t.Errorf("nginx-0's Service went on scale down")
	}

	patch(`{"metadata":{"annotations":{"service-per-pod-label":null}}}`, types.MergePatchType)
	eventually(t, "opting out removes every Service", gone("nginx-0"))

	patch(`{"metadata":{"annotations":{"service-per-pod-label":"pod-name"}}}`, types.MergePatchType)
	eventually(t, "opting in again brings the Service back", func() bool { v, _ := svcSelector("nginx-0"); return v == "nginx-0" })

	other, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/test"}})
	patch(string(other), types.JSONPatchType)
	if err := c.AppsV1().StatefulSets(ns).Delete(ctx, "nginx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delete removes the Services", gone("nginx-0"))
	eventually(t, "then the plugin's finalizer goes", func() bool {
		got, err := c.AppsV1().StatefulSets(ns).Get(ctx, "nginx", metav1.GetOptions{})
		return err == nil && !slices.Contains(got.Finalizers, fin) && slices.Contains(got.Finalizers, "example.com/test")
	})
	patch(`{"metadata":{"finalizers":null}}`, types.MergePatchType)
}
