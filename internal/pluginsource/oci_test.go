package pluginsource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/sigverify"
	"github.com/informer-host/informer-host/internal/testenv"
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
		testenv.Eventually(t, "v1", func() bool { return h.get("a.wasm") == string(one) && m.Status()["a.wasm"].RunningDigest == d1.Digest })
		d2, err := oci.Client.Push(t.Context(), two, reg.Ref("org/a:v1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the moved tag", func() bool { return h.get("a.wasm") == string(two) && m.Status()["a.wasm"].RunningDigest == d2.Digest })
		reg.Close()
		testenv.Eventually(t, "degraded with the registry gone", func() bool { return m.Status()["a.wasm"].Degraded })
		if h.get("a.wasm") != string(two) || !strings.Contains(m.Status()["a.wasm"].LastError, "resolve") {
			t.Errorf("after the registry went: running %q, status %+v", h.get("a.wasm"), m.Status()["a.wasm"])
		}
		_ = os.Remove(dir)
	})
}

// With a verify policy through sigverify against a real registry: a
// module signed with the policy's key loads, with its signer; an
// unsigned one is refused with the reason.
func TestSignedAndUnsignedFromARealRegistry(t *testing.T) {
	reg := registrytest.GGCR(t)
	dir := t.TempDir()
	privPEM, pubPEM := testKey(t)
	if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n" +
		"  registries:\n    " + reg.Host + ": {insecure: true}\n" +
		"  default:\n    verify: {required: true, keys: [cosign.pub]}\n" +
		"  modules:\n  - file: signed.wasm\n    source: oci://" + reg.Host + "/org/signed:v1\n" +
		"  - file: unsigned.wasm\n    source: oci://" + reg.Host + "/org/unsigned:v1\n"
	cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	oci, err := NewOCI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mod := append([]byte("\x00asm\x01\x00\x00\x00"), "signed"...)
	d, err := oci.Client.Push(t.Context(), mod, reg.Ref("org/signed:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sigverify.SignWithKey(t.Context(), reg.Host+"/org/signed", d.Digest, privPEM,
		sigverify.WithRemoteOptions(oci.Client.RemoteOptions(t.Context())...)); err != nil {
		t.Fatal(err)
	}
	u, err := oci.Client.Push(t.Context(), append([]byte("\x00asm\x01\x00\x00\x00"), "unsigned"...), reg.Ref("org/unsigned:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost()
	m := newManager(t, h, &Fetchers{OCI: oci}, store(t), NewSigstore(oci))
	m.Apply(t.Context(), cfg)
	testenv.Eventually(t, "the signed module to run", func() bool { return m.Status()["signed.wasm"].RunningDigest == d.Digest })
	if st := running(m, "signed.wasm"); !st.Verified || !strings.Contains(st.Signer, "cosign.pub") {
		t.Errorf("signed: %+v", st)
	}
	testenv.Eventually(t, "the unsigned one to be refused", func() bool { return m.Status()["unsigned.wasm"].Degraded })
	if st := m.Status()["unsigned.wasm"]; h.get("unsigned.wasm") != "" || !strings.Contains(st.LastError, "not verified") {
		t.Errorf("unsigned: %+v (running %q)", st, h.get("unsigned.wasm"))
	}
	// Signed after its tag moved (push, then sign): a later attempt
	// finds the signature; a refusal is not kept.
	if _, err := sigverify.SignWithKey(t.Context(), reg.Host+"/org/unsigned", u.Digest, privPEM,
		sigverify.WithRemoteOptions(oci.Client.RemoteOptions(t.Context())...)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the module signed late to run", func() bool {
		st := m.Status()["unsigned.wasm"]
		return st.RunningDigest == u.Digest && running(m, "unsigned.wasm").Verified && !st.Degraded
	})
}

// writeKeyPair writes a new key's public half to dir/name and returns its
// private half (PEM), for sigverify.SignWithKey.
func writeKeyPair(t *testing.T, dir, name string) []byte {
	t.Helper()
	privPEM, pubPEM := testKey(t)
	if err := os.WriteFile(filepath.Join(dir, name), pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return privPEM
}

// A rotated key, with the real verifier and a real registry:
// a module signed only with old.pub runs under it; a reload to new.pub
// unloads it (the running version is verified again), and a restart
// under new.pub does not start it from the cache.
func TestRotatedKeyRefusesTheRunningAndCachedVersionInARealRegistry(t *testing.T) {
	reg := registrytest.GGCR(t)
	dir := t.TempDir()
	oldKey := writeKeyPair(t, dir, "old.pub")
	writeKeyPair(t, dir, "new.pub")
	cfgWith := func(key string) *config.Config {
		in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n" +
			"  registries:\n    " + reg.Host + ": {insecure: true}\n" +
			"  modules:\n  - file: a.wasm\n    source: oci://" + reg.Host + "/org/a:v1\n" +
			"    refreshInterval: 1s\n    verify: {required: true, keys: [" + key + "]}\n"
		cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Plugins.Modules[0].RefreshInterval = config.NewDuration(10 * time.Millisecond)
		return cfg
	}
	oci, err := NewOCI(cfgWith("old.pub"))
	if err != nil {
		t.Fatal(err)
	}
	mod := append([]byte("\x00asm\x01\x00\x00\x00"), "signed with the old key"...)
	d, err := oci.Client.Push(t.Context(), mod, reg.Ref("org/a:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sigverify.SignWithKey(t.Context(), reg.Host+"/org/a", d.Digest, oldKey,
		sigverify.WithRemoteOptions(oci.Client.RemoteOptions(t.Context())...)); err != nil {
		t.Fatal(err)
	}
	st := store(t)
	h := newFakeHost()
	m := newManager(t, h, &Fetchers{OCI: oci}, st, NewSigstore(oci))
	m.Apply(t.Context(), cfgWith("old.pub"))
	testenv.Eventually(t, "the module to run under old.pub", func() bool {
		r := running(m, "a.wasm")
		return h.get("a.wasm") == string(mod) && r.Verified && strings.Contains(r.Signer, "old.pub")
	})

	m.Apply(t.Context(), cfgWith("new.pub"))
	testenv.Eventually(t, "the module to be unloaded under new.pub", func() bool { return h.get("a.wasm") == "" && m.Status()["a.wasm"].Degraded })
	if r, s := running(m, "a.wasm"), m.Status()["a.wasm"]; r.Verified || !s.Degraded || len(m.NotReady()) != 1 {
		t.Errorf("after the reload: running %+v, status %+v, NotReady %q", r, s, m.NotReady())
	}
	m.Stop()

	h = newFakeHost()
	m = newManager(t, h, &Fetchers{OCI: oci}, st, NewSigstore(oci))
	m.Apply(t.Context(), cfgWith("new.pub"))
	if h.get("a.wasm") != "" {
		t.Fatal("restarted under new.pub, the module signed with old.pub started from the cache")
	}
	testenv.Eventually(t, "refused under new.pub", func() bool { return strings.Contains(m.Status()["a.wasm"].LastError, "not verified") })
	if h.get("a.wasm") != "" {
		t.Error("the module signed with old.pub runs under new.pub")
	}
}
