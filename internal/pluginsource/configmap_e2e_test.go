package pluginsource

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

func putConfigMap(t *testing.T, ns, name string, binary map[string][]byte, data map[string]string) {
	t.Helper()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, BinaryData: binary, Data: data}
	old, err := cms.Get(context.Background(), name, metav1.GetOptions{})
	if err == nil {
		cm.ResourceVersion = old.ResourceVersion
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
	} else {
		_, err = cms.Create(context.Background(), cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("ConfigMap %s/%s: %v", ns, name, err)
	}
}

// A module kept in a ConfigMap is loaded from the real apiserver, and an
// edit of the ConfigMap is a new version that the refresh swaps in, as an
// unpinned file's would be.
func TestConfigMapSourceFollowsItsConfigMap(t *testing.T) {
	ns := env.Namespace(t)
	putConfigMap(t, ns, "mods", map[string][]byte{"a.wasm": []byte("module one")}, nil)
	h := newFakeHost()
	m := newManager(t, h, &Fetchers{RESTConfig: env.Config, MaxBytes: 1 << 20}, store(t), nil)
	cfg := parse(t, 50*time.Millisecond, "  - file: a.wasm\n    source: configmap://"+ns+"/mods/a.wasm")
	if mod, _ := cfg.Module("a.wasm"); mod.RefreshInterval.Duration == 0 || mod.PullPolicy != config.PullAlways {
		t.Fatalf("a configmap:// module is not followed: %+v", mod)
	}
	m.Apply(t.Context(), cfg)
	d1 := digestOf([]byte("module one"))
	testenv.Eventually(t, "the ConfigMap's module to run", func() bool {
		return h.get("a.wasm") == "module one" && m.Status()["a.wasm"].RunningDigest == d1
	})
	putConfigMap(t, ns, "mods", map[string][]byte{"a.wasm": []byte("module two")}, nil)
	d2 := digestOf([]byte("module two"))
	testenv.Eventually(t, "the edited ConfigMap's module to run under its own digest", func() bool {
		return h.get("a.wasm") == "module two" && m.Status()["a.wasm"].RunningDigest == d2
	})

	// data, when binaryData lacks the key (a text module, a test); a
	// missing key names the keys there are and how to put one.
	f := &Fetchers{RESTConfig: env.Config}
	putConfigMap(t, ns, "text", nil, map[string]string{"t.wasm": "text module"})
	src := func(name, key string) Source {
		return Source{Ref: config.SourceRef{Scheme: config.SchemeConfigMap, Namespace: ns, Name: name, Key: key}}
	}
	a, err := f.Fetch(t.Context(), src("text", "t.wasm"), "")
	if err != nil || string(a.Module) != "text module" || a.Digest != digestOf([]byte("text module")) {
		t.Errorf("Fetch of data[t.wasm] = %q %s, %v", a.Module, a.Digest, err)
	}
	if _, err := f.Resolve(t.Context(), src("text", "x.wasm")); err == nil || !strings.Contains(err.Error(), `no key "x.wasm"`) || !strings.Contains(err.Error(), "keys t.wasm") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := f.Resolve(t.Context(), src("absent", "x.wasm")); err == nil || !strings.Contains(err.Error(), "ConfigMap "+ns+"/absent does not exist") {
		t.Errorf("missing ConfigMap: %v", err)
	}
	pinned := src("text", "t.wasm")
	pinned.SHA256 = d1
	if _, err := f.Resolve(t.Context(), pinned); err == nil || !strings.Contains(err.Error(), "the config pins") {
		t.Errorf("pinned ConfigMap with other bytes: %v", err)
	}
	if _, err := (&Fetchers{}).Resolve(t.Context(), src("text", "t.wasm")); err != ErrNoRESTConfig {
		t.Errorf("without a RESTConfig: %v", err)
	}
}

// A module with grants.impersonate reads its ConfigMap as that
// ServiceAccount: one allowed to get it loads, one that is not is
// refused by the apiserver (although the daemon could read it), and the
// error names the ServiceAccount and the RBAC it lacks.
func TestConfigMapSourceReadsAsTheImpersonatedServiceAccount(t *testing.T) {
	ns := env.Namespace(t)
	ctx := t.Context()
	putConfigMap(t, ns, "mods", map[string][]byte{"a.wasm": []byte("tenant module")}, nil)
	env.ServiceAccount(t, ns, "reader")
	env.ServiceAccount(t, ns, "nobody")
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-mods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"mods"}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-mods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-mods"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	module := func(file, sa string) string {
		return fmt.Sprintf("  - file: %s\n    source: configmap://%s/mods/a.wasm\n    grants: {impersonate: {serviceAccount: %s/%s}}", file, ns, ns, sa)
	}
	h := newFakeHost()
	// The daemon's own identity (the administrator here) may read the
	// ConfigMap: a refusal can only come from the impersonation.
	m := newManager(t, h, &Fetchers{RESTConfig: env.Config}, store(t), nil)
	m.Apply(ctx, parse(t, time.Second, module("allowed.wasm", "reader"), module("refused.wasm", "nobody")))
	testenv.Eventually(t, "the allowed ServiceAccount's read to load", func() bool { return h.get("allowed.wasm") == "tenant module" })
	testenv.Eventually(t, "the refused ServiceAccount's source to be degraded", func() bool {
		st := m.Status()["refused.wasm"]
		return st.Degraded && st.LastError != ""
	})
	if h.get("refused.wasm") != "" {
		t.Error("a module its ServiceAccount may not read was loaded")
	}
	msg := m.Status()["refused.wasm"].LastError
	for _, want := range []string{"ServiceAccount " + ns + "/nobody", "get on configmaps in namespace " + ns, "resourceNames: [mods]", "forbidden"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
}
