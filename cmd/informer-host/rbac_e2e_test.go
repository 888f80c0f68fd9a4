package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/daemon"
	"github.com/informer-host/informer-host/internal/testenv"
)

const rbacDaemonConfig = `apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
  - {name: pods, version: v1, kind: Pod}
plugins:
  directory: plugins
  default:
    bindings: [{resource: cms}]
    limits: {restartBackoff: 10ms}
server:
  address: 127.0.0.1:0
leaderElection: {enabled: true, namespace: NS, leaseName: rbac-e2e, leaseDuration: 2s, renewDeadline: 1500ms, retryPeriod: 250ms}
`

// applyManifests creates every object of a multi-document YAML as the
// administrator; the cluster-scoped ones are deleted when the test ends.
func applyManifests(t *testing.T, text []byte) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	resources := map[string]string{"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		gvr := rbacv1.SchemeGroupVersion.WithResource(resources[u.GetKind()])
		ctx := context.Background()
		if ns := u.GetNamespace(); ns != "" {
			if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &u, metav1.CreateOptions{}); err != nil {
				t.Fatalf("apply %s %s/%s: %v", u.GetKind(), ns, u.GetName(), err)
			}
			continue
		}
		if _, err := dyn.Resource(gvr).Create(ctx, &u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
}

// The daemon runs as its ServiceAccount with exactly the RBAC `informer-host
// rbac` prints for its config (a kind resolved through discovery, leader
// election, --server-auth=kubernetes): its resources sync, it leads, its
// plugin counts what it may see, and its /metrics authenticates a scraper
// through the apiserver; nothing is refused.
func TestDaemonRunsWithItsGeneratedRBAC(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin.kubeconfig")
	if err := env.WriteKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", "counter.wasm"), testenv.WAT(t, "../../host/testdata/plugins/counter.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(rbacDaemonConfig, "NS", ns)), 0o644); err != nil {
		t.Fatal(err)
	}

	var out, stderr bytes.Buffer
	if code := Main(ctx, []string{"rbac", "--config", cfgPath, "--namespace", ns, "--service-account", "informer-host",
		"--name", "informer-host-" + ns, "--server-auth", "kubernetes", "--kubeconfig", admin}, &out, &stderr); code != 0 {
		t.Fatalf("rbac: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(out.String(), "resources: [pods]") {
		t.Fatalf("kind Pod not resolved to pods through discovery:\n%s", out.String())
	}
	applyManifests(t, out.Bytes())

	sa := env.ServiceAccount(t, ns, "informer-host")
	if err := testenv.WriteConfigKubeconfig(sa, filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	saClient := kubernetes.NewForConfigOrDie(sa)
	testenv.Eventually(t, "the generated RBAC to take effect", func() bool {
		r, err := saClient.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{Verb: "watch", Resource: "pods"}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})

	for i, n := range []string{ns, ns, ns, other} {
		if _, err := env.Client.CoreV1().ConfigMaps(n).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	daemons := make(chan *daemon.Daemon, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil)), DrainTimeout: 10 * time.Second,
			ServerAuthKubernetes: true, Started: func(d *daemon.Daemon) { daemons <- d }})
	}()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", strings.Join(logs.Lines(), "\n"))
		}
	}()
	var d *daemon.Daemon
	select {
	case d = <-daemons:
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	}
	base := "http://" + d.Server().Addr().String()

	testenv.Eventually(t, "/readyz 200: every resource synced", func() bool {
		code, _ := testenv.Get(t, base+"/readyz")
		return code == http.StatusOK
	})
	testenv.Eventually(t, "the plugin to count the 3 configmaps of its namespace", func() bool {
		return len(logs.Lines("plugin=counter.wasm", `msg="count=3"`)) > 0
	})
	testenv.Eventually(t, "this replica to hold the lease", func() bool {
		l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "rbac-e2e", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && strings.Contains(*l.Spec.HolderIdentity, "_")
	})

	// A scraper whose own RBAC allows GET /metrics gets it: the daemon
	// reviewed its token and access as its ServiceAccount.
	scraper := env.ServiceAccount(t, ns, "scraper")
	applyManifests(t, []byte(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scrape-%[1]s}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scrape-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scrape-%[1]s}
subjects: [{kind: ServiceAccount, name: scraper, namespace: %[1]s}]
`, ns)))
	testenv.Eventually(t, "/metrics to let the scraper in", func() bool {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+scraper.BearerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	if refused := logs.Lines("refused"); len(refused) > 0 {
		t.Errorf("the apiserver refused the daemon something:\n%s", strings.Join(refused, "\n"))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
}
