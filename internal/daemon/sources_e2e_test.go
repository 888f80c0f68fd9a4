package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/sigverify"
	"github.com/informer-host/informer-host/internal/testenv"
)

// The daemon runs sourced plugins: one from a file:// source loads and is
// reported in /debug/plugins and /metrics; one whose registry is not there
// keeps /readyz at 503 with the reason while it is fail-closed,
// and not once a reload makes it fail-open. Restarted with its source
// gone, the daemon starts the plugin from the source cache.
func TestDaemonRunsSourcedPlugins(t *testing.T) {
	ns := env.Namespace(t)
	dir := env.DaemonDir(t, nil)
	counter := testenv.WAT(t, "../../host/testdata/plugins/counter.wat")
	if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	srcFile := filepath.Join(dir, "src", "counter.wasm")
	if err := os.WriteFile(srcFile, counter, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(counter)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	write := func(failurePolicy string) *config.Config {
		return writeSourcesConfig(t, dir, ns, `  modules:
    - file: counter.wasm
      source: file://src/counter.wasm
    - file: pending.wasm
      source: oci://localhost:1/none:v1
      failurePolicy: `+failurePolicy+`
`)
	}
	cfg := write(config.FailClosed)
	r := startReplica(t, cfg, Options{})
	testenv.Eventually(t, "the sourced plugin to run and be reported", func() bool {
		_, body := testenv.Get(t, r.url+"/debug/plugins")
		return strings.Contains(body, `"runningDigest": "`+digest+`"`) && strings.Contains(body, `"state": "running"`)
	})
	_, body := testenv.Get(t, r.url+"/debug/plugins")
	if !strings.Contains(body, `"file": "pending.wasm"`) || !strings.Contains(body, `"state": "pending"`) {
		t.Errorf("/debug/plugins does not list the pending source:\n%s", body)
	}
	testenv.Eventually(t, "/readyz to name the fail-closed source", func() bool {
		code, body := testenv.Get(t, r.url+"/readyz")
		return code == 503 && strings.Contains(body, "plugin pending.wasm: source oci://localhost:1/none:v1 has no good version") &&
			strings.Contains(body, "resolve oci://localhost:1/none:v1")
	})
	_, metrics := testenv.Get(t, r.url+"/metrics")
	for _, want := range []string{`informer_host_plugin_source_pulls_total{plugin="counter.wasm",result="pulled"} 1`,
		`informer_host_plugin_source_degraded{plugin="pending.wasm"} 1`, `informer_host_plugin_source_running{plugin="counter.wasm"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	write(config.FailOpen)
	testenv.Eventually(t, "/readyz to be ready once the source is fail-open", func() bool {
		code, _ := testenv.Get(t, r.url+"/readyz")
		return code == 200
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// The source goes away; the restarted daemon runs the cached version.
	if err := os.Remove(srcFile); err != nil {
		t.Fatal(err)
	}
	r = startReplica(t, cfg, Options{})
	if n := len(r.logs.Lines("plugin started from the source cache's last good version", "plugin=counter.wasm")); n != 1 {
		t.Errorf("started from the cache %d times, want 1", n)
	}
	testenv.Eventually(t, "the cached version to run, degraded", func() bool {
		_, body := testenv.Get(t, r.url+"/debug/plugins")
		return strings.Contains(body, `"runningDigest": "`+digest+`"`) && strings.Contains(body, `"degraded": true`) &&
			strings.Contains(body, "no such file")
	})
}

// A rotated key on a daemon: a module from a registry signed
// only with old.pub runs under verify.required; a reload to new.pub
// (the old key revoked) unloads it, /readyz says why and /debug/plugins
// does not call it verified; restarted under new.pub, the daemon does not
// start it from the source cache.
func TestDaemonReloadedKeyRefusesTheRunningModule(t *testing.T) {
	ns := env.Namespace(t)
	dir := env.DaemonDir(t, nil)
	reg := registrytest.GGCR(t)
	counter := testenv.WAT(t, "../../host/testdata/plugins/counter.wat")
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]*ecdsa.PrivateKey{"old.pub": priv, "new.pub": nil} {
		if key == nil {
			if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
				t.Fatal(err)
			}
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(key string) *config.Config {
		return writeSourcesConfig(t, dir, ns, `  registries:
    `+reg.Host+`: {insecure: true}
  modules:
    - file: counter.wasm
      source: oci://`+reg.Host+`/org/counter:v1
      refreshInterval: 1s
      verify: {required: true, keys: [`+key+`]}
`)
	}
	cfg := write("old.pub")
	oci, err := pluginsource.NewOCI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := oci.Client.Push(t.Context(), counter, reg.Ref("org/counter:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sigverify.SignWithKey(t.Context(), reg.Host+"/org/counter", d.Digest, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		sigverify.WithRemoteOptions(oci.Client.RemoteOptions(t.Context())...)); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, cfg, Options{})
	testenv.Eventually(t, "the signed module to run, verified", func() bool {
		_, body := testenv.Get(t, r.url+"/debug/plugins")
		return strings.Contains(body, `"runningDigest": "`+d.Digest+`"`) && strings.Contains(body, `"state": "running"`) &&
			strings.Contains(body, `"verified": true`)
	})

	write("new.pub")
	testenv.Eventually(t, "/readyz to say the running module is refused under new.pub", func() bool {
		code, body := testenv.Get(t, r.url+"/readyz")
		return code == 503 && strings.Contains(body, "plugin counter.wasm") && strings.Contains(body, "not verified")
	})
	_, body := testenv.Get(t, r.url+"/debug/plugins")
	if strings.Contains(body, `"verified": true`) || !strings.Contains(body, `"state": "pending"`) {
		t.Errorf("after the reload to new.pub, /debug/plugins:\n%s", body)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	r = startReplica(t, write("new.pub"), Options{})
	if n := len(r.logs.Lines("plugin started from the source cache", "plugin=counter.wasm")); n != 0 {
		t.Errorf("started from the cache under new.pub %d times, want 0", n)
	}
	testenv.Eventually(t, "/readyz to say the cached module is refused under new.pub", func() bool {
		code, body := testenv.Get(t, r.url+"/readyz")
		return code == 503 && strings.Contains(body, "plugin counter.wasm") && strings.Contains(body, "not verified")
	})
}

// writeSourcesConfig writes (by rename, as an operator's editor would,
// so a running daemon reloads it whole) the daemon config of ns in dir
// with a source cache and the plugins lines given, and loads it.
func writeSourcesConfig(t *testing.T, dir, ns, plugins string) *config.Config {
	t.Helper()
	text := strings.Replace(testenv.DaemonConfig(ns, "", "{resource: cms}"), "server:", "  sourceCache: cache\n"+plugins+"server:", 1)
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p+".tmp", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
