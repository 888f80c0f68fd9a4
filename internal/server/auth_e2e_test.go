package server_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// serviceAccountToken creates a ServiceAccount and returns a token for it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// allow grants the ServiceAccount get on the non-resource URLs, and
// returns a function that revokes it.
func allow(t *testing.T, ns, sa string, urls ...string) (revoke func()) {
	t.Helper()
	ctx := context.Background()
	name := ns + "-" + sa
	rbac := env.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: urls, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	revoke = func() { _ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}) }
	t.Cleanup(func() {
		revoke()
		_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return revoke
}

func getWithToken(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With Kubernetes auth, /metrics and /debug/plugins answer only a token
// the real apiserver authenticates (TokenReview) whose user RBAC allows
// get on the path (SubjectAccessReview); the probes stay open; a revoked
// grant takes effect once the cached decision expires. Without it,
// everything is open.
func TestKubernetesAuth(t *testing.T) {
	ns := env.Namespace(t)
	scraper := serviceAccountToken(t, ns, "scraper")
	debugger := serviceAccountToken(t, ns, "debugger")
	nobody := serviceAccountToken(t, ns, "nobody")
	revokeScraper := allow(t, ns, "scraper", "/metrics")
	allow(t, ns, "debugger", "/debug/plugins")

	secured := "http://" + startServer(t, server.Options{AuthClient: env.Client, AuthCacheTTL: 100 * time.Millisecond})
	open := "http://" + startServer(t, server.Options{})
	tests := []struct {
		name, base, path, token string
		want                    int
	}{
		{"healthz needs no token", secured, "/healthz", "", http.StatusOK},
		{"readyz needs no token (not ready yet: nothing attached)", secured, "/readyz", "", http.StatusServiceUnavailable},
		{"metrics without a token", secured, "/metrics", "", http.StatusUnauthorized},
		{"metrics with a token the apiserver rejects", secured, "/metrics", "not-a-token", http.StatusUnauthorized},
		{"metrics, authenticated but not allowed", secured, "/metrics", nobody, http.StatusForbidden},
		{"metrics, allowed", secured, "/metrics", scraper, http.StatusOK},
		{"debug/plugins with a metrics-only grant", secured, "/debug/plugins", scraper, http.StatusForbidden},
		{"debug/plugins, allowed", secured, "/debug/plugins", debugger, http.StatusOK},
		{"no auth: metrics open", open, "/metrics", "", http.StatusOK},
		{"no auth: debug/plugins open", open, "/debug/plugins", "", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := getWithToken(t, tc.base+tc.path, tc.token); code != tc.want {
				t.Errorf("GET %s: %d, want %d: %s", tc.path, code, tc.want, body)
			}
		})
	}

	revokeScraper()
	testenv.Eventually(t, "the revoked grant to take effect", func() bool {
		code, _ := getWithToken(t, secured+"/metrics", scraper)
		return code == http.StatusForbidden
	})
}
