package host

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/sigverify"
)

const registrySourceConfig = `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  registries:
    REGISTRY: {insecure: true}
  default:
    bindings: [{resource: cms}]
  modules:
    - file: counter.wasm
      source: oci://REGISTRY/plugins/counter:stable
      refreshInterval: 1s
      verify: {required: true, keys: [KEYFILE]}
`

// The whole path of a plugin shipped through a registry, against the
// CNCF Distribution registry on loopback and the real apiserver: a
// module pushed as a Wasm OCI artifact and signed with a key is pulled,
// verified and running; each move of its tag to another signed version
// hot-swaps it under continuous churn with no event lost (the final
// version's count equals the cluster's); a version pushed unsigned to
// the tag is refused with the reason and the running version carries
// on, degraded, until a signed one follows.
func TestSignedTagMovesInARegistryUnderChurn(t *testing.T) {
	counter := testPlugin(t, "counter")
	reg := registrytest.Distribution(t, registrytest.Options{})
	keyDir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(keyDir, "cosign.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	cfgText := strings.NewReplacer("REGISTRY", reg.Host, "KEYFILE", keyFile).Replace(registrySourceConfig)

	hs, err := newHarness(t, cfgText, nil, func(hs *harness) {
		hs.logRate = engine.LogRate{PerSecond: 1e6, Burst: 1e6}
		hs.cfg.Plugins.Modules[0].RefreshInterval = config.NewDuration(20 * time.Millisecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	oci, err := pluginsource.NewOCI(hs.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ref := reg.Ref("plugins/counter:stable")
	repo := reg.Host + "/plugins/counter"
	push := func(module []byte, sign bool) string {
		t.Helper()
		d, err := oci.Client.Push(ctx, module, ref, map[string]string{"org.opencontainers.image.title": "counter.wasm"})
		if err != nil {
			t.Fatal(err)
		}
		if sign {
			if _, err := sigverify.SignWithKey(ctx, repo, d.Digest, privPEM, sigverify.WithRemoteOptions(oci.Client.RemoteOptions(ctx)...)); err != nil {
				t.Fatal(err)
			}
		}
		return d.Digest
	}

	for i := range 100 {
		hs.createCM(fmt.Sprintf("pre%d", i), nil)
	}
	current := variant(counter, 0)
	first := push(current, true)
	store, err := pluginsource.NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := pluginsource.New(pluginsource.Options{Host: hs.h, Store: store,
		Fetcher: &pluginsource.Fetchers{OCI: oci, MaxBytes: hs.cfg.ModuleSizeLimit()}, Verifier: pluginsource.NewSigstore(oci),
		Logger: slog.New(slog.NewTextHandler(hs.logs, nil)), RetryBase: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); m.Stop() })
	m.Apply(ctx, hs.cfg)
	eventually(t, "the pushed, signed version to be pulled, verified and running", func() bool {
		st, src := hs.h.Status(), m.Status()["counter.wasm"]
		return len(st) == 1 && st[0].SHA256 == sha(current) && st[0].State == StateRunning && src.RunningDigest == first
	})
	if src := m.Status()["counter.wasm"]; src.Running == nil || !src.Running.Verified || !strings.Contains(src.Running.Signer, "cosign.pub") {
		t.Fatalf("the running version is not reported verified by the key: %+v", src)
	}

	stopChurn := hs.churn(7)
	swaps := 0
	for r := 1; r <= 4; r++ {
		if r == 3 {
			unsigned := push(variant(counter, 100+r), false)
			eventually(t, "the unsigned version to be refused", func() bool {
				src := m.Status()["counter.wasm"]
				return src.ResolvedDigest == unsigned && src.Degraded && strings.Contains(src.LastError, "not verified")
			})
			if st := hs.status("counter.wasm"); st.State != StateRunning || st.SHA256 != sha(current) {
				t.Errorf("after the unsigned push: host %s %.12s, want %.12s running", st.State, st.SHA256, sha(current))
			}
			continue
		}
		current = variant(counter, r)
		digest := push(current, true)
		want := sha(current)
		eventually(t, fmt.Sprintf("tag move %d to swap", r), func() bool {
			st, src := hs.status("counter.wasm"), m.Status()["counter.wasm"]
			return st.SHA256 == want && st.State == StateRunning && src.RunningDigest == digest && !src.Degraded
		})
		swaps++
		hs.handlesLive(t, fmt.Sprintf("version %d", r), want)
	}
	stopChurn()

	want := hs.countsTheCluster(t, sha(current))
	if st := hs.status("counter.wasm"); st.Counters.Reloads != uint64(swaps) {
		t.Errorf("reloads = %d after %d tag moves (the unsigned one is refused before the host): %+v", st.Counters.Reloads, swaps, st.Counters)
	}
	t.Logf("%d signed tag moves, one unsigned refused, %d objects at the end", swaps, want)
}
