package testenv

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With StartControllers, the control plane does what a cluster's does
// without nodes: a Deployment gets its ReplicaSet and that its Pods, each
// owned (controller ownerReference) by the one before; deleting the
// Deployment deletes the rest through the garbage collector, and deleting
// a namespace deletes what it holds and then the namespace.
func TestControllers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane with controllers, which -short does not")
	}
	env, err := start(true, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	env.Controllers(t)
	ctx := context.Background()
	cs := env.Client

	ns := "controllers"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const replicas = 3
	dep, err := cs.AppsV1().Deployments(ns).Create(ctx, Deployment("web", replicas), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var rs appsv1.ReplicaSet
	Eventually(t, "the Deployment's ReplicaSet", func() bool {
		list, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		rs = list.Items[0]
		return true
	})
	var pods []corev1.Pod
	Eventually(t, fmt.Sprintf("the ReplicaSet's %d Pods", replicas), func() bool {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != replicas {
			return false
		}
		pods = list.Items
		return true
	})

	type link struct {
		what       string
		refs       []metav1.OwnerReference
		kind, name string
		uid        string
	}
	links := []link{{"ReplicaSet " + rs.Name, rs.OwnerReferences, "Deployment", dep.Name, string(dep.UID)}}
	for _, p := range pods {
		links = append(links, link{"Pod " + p.Name, p.OwnerReferences, "ReplicaSet", rs.Name, string(rs.UID)})
	}
	for _, l := range links {
		t.Run(l.what, func(t *testing.T) {
			c := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: l.refs})
			if c == nil {
				t.Fatalf("no controller ownerReference: %+v", l.refs)
			}
			if c.Kind != l.kind || c.Name != l.name || string(c.UID) != l.uid {
				t.Errorf("controlled by %s %s (%s), want %s %s (%s)", c.Kind, c.Name, c.UID, l.kind, l.name, l.uid)
			}
		})
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
			t.Errorf("pod %s: phase %q on node %q; without a scheduler and a kubelet it stays Pending and unscheduled", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}

	// The API's default for a Deployment is background deletion: the
	// garbage collector removes the dependents after the owner is gone.
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, dep.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "the garbage collector to delete the ReplicaSet and its Pods", func() bool {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(rss.Items) != 0 {
			return false
		}
		ps, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(ps.Items) == 0
	})

	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "left"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "the namespace controller to empty and remove namespace "+ns, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
