package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/testenv"
)

const labelEnforcerConfig = `
apiVersion: informer-host/v1
resources:
- {name: pods, version: v1, resource: pods, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
  - file: label-enforcer.wasm
    bindings: [{resource: pods, events: [add, update], dropSelfNoop: true}]
    config: {key: team, value: unowned, trapOn: trap-me}
    limits: {restartBackoff: 50ms}
    grants:
      writes:
        resources: [{resource: pods, verbs: [apply]}]
        qps: 1000
        burst: 1000
`

// createPods creates the named pods, unlabelled, all at once.
func createPods(t *testing.T, ns string, names []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Go(func() {
			_, err := env.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func podNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// labelledPods counts the namespace's pods that carry the label.
func labelledPods(t *testing.T, ns string) int {
	l, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "team=unowned"})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestLabelEnforcerExample runs the label-enforcer example against the
// real apiserver. 200 pods created at once all end labelled, by exactly
// one write each, and each write's update comes back flagged as the
// plugin's own (it does not write again). Then it converges again after
// a trap right after a write, and after a reload in the middle of a
// burst: no pod is written twice; a pod whose write the reload canceled
// (the plugin logs "canceled") may have been written by the canceled
// request or by the next version.
func TestLabelEnforcerExample(t *testing.T) {
	var proxy *testenv.SlowProxy
	hs, err := newHarness(t, labelEnforcerConfig, map[string][]byte{"label-enforcer.wasm": example(t, "label-enforcer")}, func(hs *harness) {
		hs.logRate = engine.LogRate{PerSecond: 1e6, Burst: 1e6}
		proxy, hs.writesRest = testenv.NewSlowProxy(t, env.Config)
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(what, pod string) int {
		return len(hs.logs.lines("plugin=label-enforcer.wasm", "msg=\""+what+" "+hs.ns+"/"+pod+"\""))
	}
	total := func(what string) int { return len(hs.logs.lines("plugin=label-enforcer.wasm", "msg=\""+what+" ")) }

	first := podNames("web", 200)
	createPods(t, hs.ns, first)
	eventually(t, "200 pods labelled", func() bool { return labelledPods(t, hs.ns) == 200 })
	eventually(t, "each write's update back, flagged as the plugin's own", func() bool { return total("own write") == 200 })
	for _, p := range first {
		if n, own := count("labelled", p), count("own write", p); n != 1 || own != 1 {
			t.Errorf("pod %s: %d writes and %d own-write events, want 1 and 1", p, n, own)
		}
	}
	if n := total("stale"); n != 0 {
		t.Errorf("%d stale writes without any disruption", n)
	}
	if n := total("labelled"); n != 200 {
		t.Fatalf("%d writes for 200 unlabelled pods", n)
	}

	// A trap right after a write: the fresh instance gets the cache
	// replayed and finds trap-me labelled, or stale (its apply conflicts).
	second := append(podNames("api", 49), "trap-me")
	createPods(t, hs.ns, second)
	eventually(t, "250 pods labelled after the trap", func() bool { return labelledPods(t, hs.ns) == 250 })
	eventually(t, "the plugin restarted after its trap", func() bool {
		c := hs.status("label-enforcer.wasm").Counters
		return c.Traps == 1 && c.Restarts == 1
	})
	for _, p := range second {
		if n := count("labelled", p); n != 1 {
			t.Errorf("pod %s: %d writes after the trap, want 1", p, n)
		}
	}

	// A reload in the middle of a burst: writes are slowed (50 take 5s
	// at least), the new version compiles meanwhile and takes over.
	proxy.Delay.Store(int64(100 * time.Millisecond))
	third := podNames("db", 50)
	createPods(t, hs.ns, third)
	eventually(t, "some of the burst labelled", func() bool { return labelledPods(t, hs.ns) >= 252 })
	hs.write("label-enforcer.wasm", variant(example(t, "label-enforcer"), 1))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "label-enforcer.wasm")); err != nil {
		t.Fatal(err)
	}
	if c := hs.status("label-enforcer.wasm").Counters; c.Reloads != 1 {
		t.Fatalf("counters %+v after the reload", c)
	}
	proxy.Delay.Store(0)
	eventually(t, "300 pods labelled after the reload", func() bool { return labelledPods(t, hs.ns) == 300 })
	for _, p := range third {
		n, canceled := count("labelled", p), count("canceled", p)
		if n > 1 || n+canceled < 1 {
			t.Errorf("pod %s: %d writes, %d canceled, across the reload; want at most one write, and one unless canceled", p, n, canceled)
		}
	}
	if n := len(hs.logs.lines("plugin=label-enforcer.wasm", "failed to handle")); n != 0 {
		t.Errorf("%d events failed: %v", n, hs.logs.lines("plugin=label-enforcer.wasm", "failed to handle"))
	}
	t.Logf("writes %d, own-write events %d, stale %d, canceled %d", total("labelled"), total("own write"), total("stale"), total("canceled"))
}

// A plugin given the identity of ServiceAccount NS/sa-a, whose Role lets
// it patch ConfigMaps only, is refused by the apiserver's RBAC
// (ERR_FORBIDDEN, with the apiserver's message naming the ServiceAccount)
// when it patches a Secret, though its grant lists Secrets; its
// ConfigMap patch lands.
func TestWriteImpersonatedServiceAccount(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
- {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
- {name: secrets, version: v1, resource: secrets, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
  - file: writer.wasm
    bindings: [{resource: configmaps, events: [add]}, {resource: secrets, events: [add]}]
    config: {metadata: {labels: {written: "yes"}}}
    grants:
      writes:
        resources: [{resource: configmaps, verbs: [patch]}, {resource: secrets, verbs: [patch]}]
      impersonate: {serviceAccount: NS/sa-a}
`, map[string][]byte{"writer.wasm": fixture(t, "writer")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-patcher"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}}}
	if _, err := env.Client.RbacV1().Roles(hs.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sa-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-patcher"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa-a", Namespace: hs.ns}}}
	if _, err := env.Client.RbacV1().RoleBindings(hs.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hs.createCM("c", nil)
	if _, err := env.Client.CoreV1().Secrets(hs.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ConfigMap patched as sa-a", func() bool {
		cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(ctx, "c", metav1.GetOptions{})
		return err == nil && cm.Labels["written"] == "yes"
	})
	eventually(t, "the Secret's patch refused", func() bool {
		return len(hs.logs.lines("plugin=writer.wasm", "failed to handle", "secrets "+hs.ns+"/s")) == 1
	})
	line := hs.logs.lines("plugin=writer.wasm", "failed to handle", "secrets "+hs.ns+"/s")[0]
	if !strings.Contains(line, "forbidden") || !strings.Contains(line, "system:serviceaccount:"+hs.ns+":sa-a") {
		t.Fatalf("refusal %q: want the apiserver's forbidden message naming the ServiceAccount", line)
	}
	s, err := env.Client.CoreV1().Secrets(hs.ns).Get(ctx, "s", metav1.GetOptions{})
	if err != nil || s.Labels["written"] != "" {
		t.Fatalf("secret %v %v: written though forbidden", s.Labels, err)
	}
}
