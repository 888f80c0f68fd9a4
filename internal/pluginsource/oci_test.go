package pluginsource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
)

// Against a real registry on loopback (go-containerregistry's, and the
// CNCF Distribution registry): a tag that moves is swapped in; the
// registry going away leaves the last good version running, degraded.
func TestOCITagMovesInARealRegistry(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir := t.TempDir()
		in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n" +
			"  registries:\n    " + reg.Host + ": {insecure: true}\n" +
			"  modules:\n  - file: a.wasm\n    source: oci://" + reg.Host + "/org/a:v1\n"
		cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Plugins.Modules[0].RefreshInterval = config.NewDuration(10 * time.Millisecond)
		oci, err := NewOCI(cfg)
		if err != nil {
			t.Fatal(err)
		}
		one := append([]byte("\x00asm\x01\x00\x00\x00"), "one"...)
		two := append([]byte("\x00asm\x01\x00\x00\x00"), "two"...)
		d1, err := oci.Client.Push(t.Context(), one, reg.Ref("org/a:v1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := newFakeHost()
		m := newManager(t, h, &Fetchers{OCI: oci}, store(t), nil)
		m.Apply(t.Context(), cfg)
		eventually(t, "v1", func() bool { return h.get("a.wasm") == string(one) && m.Status()["a.wasm"].RunningDigest == d1.Digest })
		d2, err := oci.Client.Push(t.Context(), two, reg.Ref("org/a:v1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the moved tag", func() bool { return h.get("a.wasm") == string(two) && m.Status()["a.wasm"].RunningDigest == d2.Digest })
		reg.Close()
		eventually(t, "degraded with the registry gone", func() bool { return m.Status()["a.wasm"].Degraded })
		if h.get("a.wasm") != string(two) || !strings.Contains(m.Status()["a.wasm"].LastError, "resolve") {
			t.Errorf("after the registry went: running %q, status %+v", h.get("a.wasm"), m.Status()["a.wasm"])
		}
		_ = os.Remove(dir)
	})
}
