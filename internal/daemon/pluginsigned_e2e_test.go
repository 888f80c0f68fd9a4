package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/sigverify"
	"github.com/informer-host/informer-host/internal/testenv"
)

// A ClusterPlugin from a real loopback OCI registry, signed with a key
// its spec.verify names inline, end to end: Ready with the pushed digest
// and the key as signer, Verified; pointed at a new tag that is not
// signed (and then at one signed by another key), Degraded with why and
// not Ready, while the verified version keeps running and handling
// events; deleted, its plugin unloads and the status writer lets go of it.
func TestSignedPluginResource(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := env.DaemonDir(t, nil)
	reg := registrytest.GGCR(t)
	counter := testenv.WAT(t, "../../host/testdata/plugins/counter.wat")

	type key struct {
		priv, pub []byte // PEM
		fp        string // sha256 of the PKIX DER, as sigverify names a key
	}
	newKey := func() key {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(pub)
		return key{pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), hex.EncodeToString(sum[:])}
	}
	trusted, other := newKey(), newKey()

	cfg := writeSourcesConfig(t, dir, ns, "  registries:\n    "+reg.Host+": {insecure: true}\n")
	oci, err := pluginsource.NewOCI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// push pushes a variant of the counter as tag, signed with k unless
	// k is nil, and returns its digest.
	push := func(tag string, n int, k *key) string {
		t.Helper()
		d, err := oci.Client.Push(ctx, variant(counter, n), reg.Ref("org/counter:"+tag), nil)
		if err != nil {
			t.Fatal(err)
		}
		if k != nil {
			if _, err := sigverify.SignWithKey(ctx, reg.Host+"/org/counter", d.Digest, k.priv,
				sigverify.WithRemoteOptions(oci.Client.RemoteOptions(ctx)...)); err != nil {
				t.Fatal(err)
			}
		}
		return d.Digest
	}
	good := push("v1", 1, &trusted)
	unsigned := push("v2", 2, nil)
	otherSigned := push("v3", 3, &other)

	installPluginCRDs(t)
	r := startReplica(t, cfg, Options{resourcesDiscovery: 50 * time.Millisecond})
	clusterPlugins := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.ClusterPluginsGVR)
	name := "signed-" + ns
	plugin := v1alpha1.PluginName("", name)
	apply := func(tag string) {
		t.Helper()
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": v1alpha1.KindClusterPlugin,
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"source":   map[string]any{"oci": reg.Host + "/org/counter:" + tag, "refreshInterval": "1s"},
				"verify":   map[string]any{"required": true, "publicKeys": []any{string(trusted.pub)}},
				"bindings": []any{map[string]any{"resource": "cms"}},
			},
		}}
		applyObject(t, clusterPlugins, o)
	}
	status := func() (v1alpha1.PluginStatus, int64) { return objectStatus(t, clusterPlugins, name) }
	is := hasCondition
	running := func() (host.PluginStatus, bool) {
		for _, s := range r.d.Host().Status() {
			if s.File == plugin {
				return s, true
			}
		}
		return host.PluginStatus{}, false
	}
	cms := env.Client.CoreV1().ConfigMaps(ns)
	made := 0
	// handles creates a configmap and waits for the counter to count
	// every configmap of ns: the running version is delivered events.
	handles := func(what string) {
		t.Helper()
		made++
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", made)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`msg="count=%d"`, made)
		testenv.Eventually(t, what, func() bool { return len(r.logs.Lines("plugin="+plugin, want)) > 0 })
	}

	// Signed with the key the spec names: Ready, with the pushed digest,
	// verified by that key.
	apply("v1")
	testenv.Eventually(t, "Ready and Verified with the pushed digest and the key as signer", func() bool {
		st, gen := status()
		return st.ObservedGeneration == gen && st.Digest == good && strings.Contains(st.Signer, "sha256:"+trusted.fp[:16]) &&
			is(st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning) &&
			is(st, v1alpha1.ConditionVerified, metav1.ConditionTrue, v1alpha1.ReasonVerified, good, "sha256:"+trusted.fp[:16]) &&
			is(st, v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonHealthy)
	})
	handles("the verified version to handle a configmap")
	loaded, _ := running()

	// A new tag that verifies not under the spec's key: unsigned, then
	// signed by another key. Each is Degraded with why, not Ready, and
	// the verified version keeps running and handling events.
	for _, c := range []struct{ tag, digest string }{{"v2", unsigned}, {"v3", otherSigned}} {
		apply(c.tag)
		testenv.Eventually(t, c.tag+": Degraded and not Ready while the verified version runs", func() bool {
			st, gen := status()
			return st.ObservedGeneration == gen && st.Digest == good &&
				is(st, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonSourceFailed, c.digest, "not verified", "keeps running") &&
				is(st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSourceFailed, "not verified", good) &&
				st.LastFailure != nil && strings.Contains(st.LastFailure.Message, "not verified")
		})
		if p, ok := running(); !ok || p.State != host.StateRunning || p.SHA256 != loaded.SHA256 {
			t.Errorf("%s: the host runs %+v, want the verified version %.12s running", c.tag, p, loaded.SHA256)
		}
		handles(c.tag + ": the verified version to keep handling configmaps")
	}

	// Deleted: the plugin unloads, /debug/plugins no longer lists it, and
	// the writer, which writes the objects the daemon admitted, has
	// nothing of it left to write.
	if err := clusterPlugins.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted ClusterPlugin's plugin to unload", func() bool {
		_, ok := running()
		_, body := testenv.Get(t, r.url+"/debug/plugins")
		return !ok && !strings.Contains(body, plugin) && len(r.d.PluginResources().Admissions()) == 0
	})
	// Another object's status written after the delete shows the writer
	// looked again since; it tried no write of the deleted one.
	later := "later-" + ns
	apply2 := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": v1alpha1.KindClusterPlugin,
		"metadata": map[string]any{"name": later},
		"spec":     map[string]any{"source": map[string]any{"oci": reg.Host + "/org/counter:v1"}, "bindings": []any{map[string]any{"resource": "cms"}}},
	}}
	if _, err := clusterPlugins.Create(ctx, apply2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clusterPlugins.Delete(context.Background(), later, metav1.DeleteOptions{}) })
	testenv.Eventually(t, "a later object's status to be written", func() bool {
		st, _ := objectStatus(t, clusterPlugins, later)
		return is(st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	})
	if l := r.logs.Lines("plugin status", name); len(l) > 0 {
		t.Errorf("the status writer still tried the deleted object:\n%s", strings.Join(l, "\n"))
	}
}
