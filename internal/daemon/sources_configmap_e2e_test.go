package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// The daemon hands its apiserver to the sources: a plugin whose module
// is kept in a ConfigMap runs, and an edit of the ConfigMap swaps in the
// new module on the next refresh.
func TestDaemonRunsAConfigMapSourcedPlugin(t *testing.T) {
	ns := env.Namespace(t)
	dir := env.DaemonDir(t, nil)
	ctx := context.Background()
	digestOf := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	counter := testenv.WAT(t, "../../host/testdata/plugins/counter.wat")
	synced := testenv.WAT(t, "../../host/testdata/plugins/synced.wat")
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mods"}, BinaryData: map[string][]byte{"plugin.wasm": counter}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeSourcesConfig(t, dir, ns, `  modules:
    - file: cm.wasm
      source: configmap://`+ns+`/mods/plugin.wasm
      refreshInterval: 1s
`)
	r := startReplica(t, cfg, Options{})
	running := func(digest string) func() bool {
		return func() bool {
			_, body := testenv.Get(t, r.url+"/debug/plugins")
			return strings.Contains(body, `"runningDigest": "`+digest+`"`) && strings.Contains(body, `"state": "running"`)
		}
	}
	testenv.Eventually(t, "the ConfigMap's module to run", running(digestOf(counter)))
	cm.BinaryData["plugin.wasm"] = synced
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the edited ConfigMap's module to run", running(digestOf(synced)))
}
