//go:build !race

// Not under -race, as interop_e2e_test.go: it checks what crosses
// between processes and formats.

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/sigverify"
)

// What cosign signs, in either of its formats, travels in a bundle: after
// bundle save, the registry gone and bundle load into a fresh cache, the
// daemon's verifier under a required key policy finds the signature in
// the cache alone.
func TestCosignSignaturesTravelInBundles(t *testing.T) {
	cosign := outsideClient(t, "cosign", "github.com/sigstore/cosign/v2")
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir, key, pub, _ := signingDir(t, cosign)
		refs := map[string]string{}
		for _, tc := range []struct {
			name  string
			flags []string
		}{{"legacy", nil}, {"bundle", []string{"--new-bundle-format"}}} {
			ref := pushModule(t, reg, dir, "travel-"+tc.name)
			args := append([]string{"sign", "--key", key, "--tlog-upload=false", "--allow-insecure-registry", "-y"}, tc.flags...)
			if out, err := tool(t, dir, []string{"COSIGN_PASSWORD=" + cosignPassword}, cosign, append(args, ref)...); err != nil {
				t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			refs[tc.name] = ref
		}
		tarFile := filepath.Join(dir, "signed.tar")
		if code, out, errOut := run(t, "bundle", "save", "--insecure", "-o", tarFile, "oci://"+refs["legacy"], "oci://"+refs["bundle"]); code != 0 {
			t.Fatalf("bundle save: exit %d: %s%s", code, out, errOut)
		}
		reg.Close()
		cache := filepath.Join(t.TempDir(), "cache")
		if code, out, errOut := run(t, "bundle", "load", "--cache", cache, tarFile); code != 0 || strings.Count(out, "signature ") < 2 {
			t.Fatalf("bundle load: exit %d, want the two signatures named: %s%s", code, out, errOut)
		}
		v, err := sigverify.New(sigverify.Policy{Required: true, Keys: []string{pub}},
			sigverify.WithLocalLayout(ociartifact.Store{Dir: cache}.SignatureDir()))
		if err != nil {
			t.Fatal(err)
		}
		for name, ref := range refs {
			repo, digest, _ := strings.Cut(ref, "@")
			if res, err := v.Verify(t.Context(), repo, digest); err != nil || !res.Verified {
				t.Errorf("cosign's %s signature from the bundle: %+v %v", name, res, err)
			}
		}
	})
}
