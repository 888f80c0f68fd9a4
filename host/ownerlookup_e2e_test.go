package host

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// countingTransport counts the requests the host's clients send.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestOwnerLookupExample runs the owner-lookup example against the real
// apiserver: for each Pod event it finds the ReplicaSet and Deployment in
// the host's caches and counts the Deployment's pods through the owner
// index, and the host's client sends no request for any of those reads
// (every request it sends is counted, from before the plugin's first
// event on). There is no controller manager in the test control plane, so
// the test creates the Deployment, ReplicaSet and Pods with their
// ownerReferences itself.
func TestOwnerLookupExample(t *testing.T) {
	var requests atomic.Int64
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
- {name: pods, version: v1, resource: pods, namespaces: [NS]}
- {name: replicasets, group: apps, version: v1, resource: replicasets, namespaces: [NS]}
- {name: deployments, group: apps, version: v1, resource: deployments, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
  - file: owner-lookup.wasm
    bindings: [{resource: pods}]
    grants:
      cache:
      - {resource: pods, indexes: [owner]}
      - {resource: replicasets, indexes: [owner]}
      - {resource: deployments}
`, map[string][]byte{"owner-lookup.wasm": example(t, "owner-lookup")}, func(hs *harness) {
		c := rest.CopyConfig(env.Config)
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: &requests} })
		hs.rest = c
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	dep, err := env.Client.AppsV1().Deployments(hs.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: new(bool)}}
	}
	rs, err := env.Client.AppsV1().ReplicaSets(hs.ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Labels: labels, OwnerReferences: owner("Deployment", dep.Name, dep.UID)},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet and Deployment are in the host's caches before the
	// first Pod, so its event can find them.
	eventually(t, "the replicaset and deployment in the host's caches", func() bool {
		_, ok1 := hs.p.CacheGet("replicasets", hs.ns, rs.Name)
		_, ok2 := hs.p.CacheGet("deployments", hs.ns, dep.Name)
		return ok1 && ok2
	})
	before := requests.Load()
	if before == 0 {
		t.Fatal("the counting transport saw none of the informers' list and watch requests: it is not in the host's client")
	}
	// One pod at a time, each waited for: the count a pod's event sees is
	// what the cache holds then, and the cache may run ahead of delivery,
	// so pods created together could skip a count.
	for i, name := range []string{"web-abc-1", "web-abc-2", "web-abc-3"} {
		if _, err := env.Client.CoreV1().Pods(hs.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: owner("ReplicaSet", rs.Name, rs.UID)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("deployment %s/web pods=%d (via replicaset web-abc, after add of %s)", hs.ns, i+1, name)
		eventually(t, "owner-lookup to count the deployment's pods after "+name, func() bool {
			return len(hs.logs.lines("plugin=owner-lookup.wasm", want)) > 0
		})
	}
	if d := requests.Load() - before; d != 0 {
		t.Errorf("the host's client sent %d requests while the plugin read the cache; want none", d)
	}
	if l := hs.logs.lines("plugin=owner-lookup.wasm", "denied"); len(l) != 0 {
		t.Errorf("denials: %v", l)
	}
}
