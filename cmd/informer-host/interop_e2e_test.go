//go:build !race

// Not under -race (mk/race.mk runs this package again with it): these
// tests check what crosses between processes, formats and signatures, and
// start no goroutines of their own for the race detector to watch.

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/testenv"
)

// outsideClient is the path of oras or cosign as `make clients` builds
// it: $ORAS or $COSIGN (the Makefile sets both), else where
// hack/<name>/build.sh puts the version hack/<name>/go.mod pins, as
// testenv finds the control plane. A missing binary fails the test and
// says how to build it; -short (`make test-unit`) skips, as it does every
// test that needs a built tool.
func outsideClient(t *testing.T, name, module string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("runs %s, built by `make clients`, which -short does not use", name)
	}
	envVar := strings.ToUpper(name)
	bin := os.Getenv(envVar)
	if bin == "" {
		gomod := filepath.Join("..", "..", "hack", name, "go.mod")
		b, err := os.ReadFile(gomod)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^require ` + regexp.QuoteMeta(module) + ` (v\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s has no `require %s vX.Y.Z` line, which hack/%s/build.sh reads too", gomod, module, name)
		}
		cache := os.Getenv("INFORMER_HOST_CACHE")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				t.Fatal(err)
			}
			cache = filepath.Join(base, "informer-host")
		}
		bin = filepath.Join(cache, name, string(m[1]), name)
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s not found at %s: run `make clients` (hack/%s/build.sh builds it from the Go module proxy once, "+
			"into the cache by version) or point $%s at one", name, bin, name, envVar)
	}
	return bin
}

// tool runs an outside client in dir with a home of its own (no
// ~/.docker/config.json, no ~/.sigstore of the machine's) and env added,
// and returns its combined output.
func tool(t *testing.T, dir string, env []string, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "DOCKER_CONFIG=" + filepath.Join(home, ".docker"),
		"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// interopModule is a module that loads (inspect says so), written to
// dir/name.
func interopModule(t *testing.T, dir, name string) []byte {
	t.Helper()
	wasm := testenv.WAT(t, "../../host/testdata/fixtures/state.wat")
	if err := os.WriteFile(filepath.Join(dir, name), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	return wasm
}

// Each form a user pushes with oras pulls back byte for byte, inspect
// says which form it read and that the module loads, and a bundle of it
// loads into a cache.
func TestOrasPushedFormsPull(t *testing.T) {
	oras := outsideClient(t, "oras", "oras.land/oras")
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir := t.TempDir()
		wasm := interopModule(t, dir, "plugin.wasm")
		files := map[string][]byte{
			"wasm-config.json":  []byte(`{"architecture":"wasm","os":"wasip1"}`),
			"image-config.json": []byte(`{"architecture":"wasm","os":"wasip1","rootfs":{"type":"layers","diff_ids":[]}}`),
			"plugin.tar.gz":     tarGzip(t, map[string][]byte{"plugin.wasm": wasm}),
		}
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name   string
			args   []string // after `oras push --plain-http REF`
			format ociartifact.Format
		}{
			// oras's default, OCI 1.1: config application/vnd.oci.empty.v1+json.
			{"default", []string{"plugin.wasm:application/wasm"}, ociartifact.FormatWasmLayer},
			{"artifact-type", []string{"--artifact-type", "application/vnd.module.wasm.content.layer.v1+wasm", "plugin.wasm:application/wasm"}, ociartifact.FormatWasmLayer},
			// OCI 1.0: config application/vnd.unknown.config.v1+json.
			{"image-spec-v1.0", []string{"--image-spec", "v1.0", "plugin.wasm:application/wasm"}, ociartifact.FormatWasmLayer},
			{"cncf", []string{"--config", "wasm-config.json:" + ociartifact.ConfigMediaType, "plugin.wasm:application/wasm"}, ociartifact.FormatCNCF},
			{"wasm-to-oci", []string{"plugin.wasm:" + ociartifact.WasmToOCILayerMediaType}, ociartifact.FormatWasmToOCI},
			{"istio-image", []string{"--config", "image-config.json:application/vnd.oci.image.config.v1+json",
				"plugin.tar.gz:application/vnd.oci.image.layer.v1.tar+gzip"}, ociartifact.FormatImage},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ref := reg.Ref("plugins/oras:" + tc.name)
				if out, err := tool(t, dir, nil, oras, append([]string{"push", "--plain-http", ref}, tc.args...)...); err != nil {
					t.Fatalf("oras push %s: %v\n%s", strings.Join(tc.args, " "), err, out)
				}
				pulled := filepath.Join(t.TempDir(), "pulled.wasm")
				code, out, errOut := run(t, "pull", "--insecure", "-o", pulled, "oci://"+ref)
				if code != 0 {
					t.Fatalf("informer-host pull: exit %d: %s", code, errOut)
				}
				if got, err := os.ReadFile(pulled); err != nil || !bytes.Equal(got, wasm) {
					t.Fatalf("informer-host pull wrote other bytes than oras pushed (%v)", err)
				}
				if !strings.Contains(out, "("+string(tc.format)+",") {
					t.Errorf("pull output does not name the form %s: %s", tc.format, out)
				}
				code, out, errOut = run(t, "inspect", "--insecure", "oci://"+ref)
				if code != 0 {
					t.Fatalf("informer-host inspect: exit %d: %s\n%s", code, errOut, out)
				}
				for _, want := range []string{"format:     " + string(tc.format) + " (", "loads:      yes"} {
					if !strings.Contains(out, want) {
						t.Errorf("inspect output lacks %q:\n%s", want, out)
					}
				}
				// And air-gapped: a bundle of it loads into a cache as the
				// source's module.
				tmp := t.TempDir()
				tarFile, cache := filepath.Join(tmp, "plugins.tar"), filepath.Join(tmp, "cache")
				if code, out, errOut := run(t, "bundle", "save", "--insecure", "-o", tarFile, "oci://"+ref); code != 0 {
					t.Fatalf("bundle save: exit %d: %s%s", code, out, errOut)
				}
				if code, _, errOut := run(t, "bundle", "load", "--cache", cache, tarFile); code != 0 {
					t.Fatalf("bundle load: exit %d: %s", code, errOut)
				}
				store := ociartifact.Store{Dir: cache}
				rec, ok, err := store.LoadRecord("oci://" + ref)
				if err != nil || !ok {
					t.Fatalf("bundle load left no record of %s: %v", ref, err)
				}
				if b, err := store.Read(rec.ModuleDigest, 1<<20); err != nil || !bytes.Equal(b, wasm) || rec.Format != tc.format {
					t.Errorf("bundle load of %s: format %s, module differs or unreadable (%v)", ref, rec.Format, err)
				}
			})
		}
	})
}

// oras pulls what informer-host push pushed: the same bytes, under the
// module's file name.
func TestOrasPullsWhatPushPushed(t *testing.T) {
	oras := outsideClient(t, "oras", "oras.land/oras")
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir := t.TempDir()
		wasm := interopModule(t, dir, "state.wasm")
		ref := reg.Ref("plugins/state:v1")
		if code, _, errOut := run(t, "push", "--insecure", filepath.Join(dir, "state.wasm"), "oci://"+ref); code != 0 {
			t.Fatalf("informer-host push: exit %d: %s", code, errOut)
		}
		out := t.TempDir()
		if o, err := tool(t, dir, nil, oras, "pull", "--plain-http", "-o", out, ref); err != nil {
			t.Fatalf("oras pull: %v\n%s", err, o)
		}
		if got, err := os.ReadFile(filepath.Join(out, "state.wasm")); err != nil || !bytes.Equal(got, wasm) {
			t.Fatalf("oras pull gave other bytes than informer-host pushed (%v)", err)
		}
	})
}

// tarGzip is Istio's image layer: a tar+gzip of files.
func tarGzip(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for n, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// cosignPassword is what cosign reads the key's password from; the key pair
// interopKeys makes is encrypted with it.
const cosignPassword = "interop"

// signingDir is a directory holding state.wasm and a cosign key pair
// made by cosign itself (cosign.key, encrypted with cosignPassword, and
// cosign.pub), and otherPub, a public key that signs nothing.
func signingDir(t *testing.T, cosign string) (dir, key, pub, otherPub string) {
	t.Helper()
	dir = t.TempDir()
	interopModule(t, dir, "state.wasm")
	other := t.TempDir()
	for _, d := range []string{dir, other} {
		if out, err := tool(t, d, []string{"COSIGN_PASSWORD=" + cosignPassword}, cosign, "generate-key-pair"); err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
	}
	return dir, filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub"), filepath.Join(other, "cosign.pub")
}

// pushModule pushes the module in dir/state.wasm to repo with
// informer-host push, an annotation making its manifest its own, and
// returns the reference by digest.
func pushModule(t *testing.T, reg *registrytest.Server, dir, repo string) string {
	t.Helper()
	ref := "oci://" + reg.Ref(repo+":v1")
	code, out, errOut := run(t, "push", "--insecure", "--annotation", "repo="+repo, filepath.Join(dir, "state.wasm"), ref)
	if code != 0 {
		t.Fatalf("informer-host push: exit %d: %s", code, errOut)
	}
	return reg.Ref(repo + "@" + strings.TrimSpace(out))
}

// What cosign signs with a key, offline, in either of its formats (the
// legacy .sig tag and the sigstore bundle referrer), informer-host verify
// (the daemon's sigverify under `verify: required`) accepts with
// cosign.pub; a digest nobody signed is refused.
func TestCosignSignaturesVerify(t *testing.T) {
	cosign := outsideClient(t, "cosign", "github.com/sigstore/cosign/v2")
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir, key, pub, otherPub := signingDir(t, cosign)
		for _, tc := range []struct {
			name  string
			flags []string
			found string // where verify says the signature was
		}{
			{"legacy", nil, "cosign simple-signing in tag sha256-"},
			{"bundle", []string{"--new-bundle-format"}, "sigstore bundle in referrer sha256:"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ref := pushModule(t, reg, dir, "cosign-"+tc.name)
				args := append([]string{"sign", "--key", key, "--tlog-upload=false", "--allow-insecure-registry", "-y"}, tc.flags...)
				if out, err := tool(t, dir, []string{"COSIGN_PASSWORD=" + cosignPassword}, cosign, append(args, ref)...); err != nil {
					t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				code, out, errOut := run(t, "verify", "--insecure", "oci://"+ref, "--key", pub)
				if code != 0 || !strings.Contains(out, "verified, signed by") || !strings.Contains(out, tc.found) {
					t.Fatalf("informer-host verify of cosign's %s signature: exit %d, want 0 and %q: %s%s", tc.name, code, tc.found, out, errOut)
				}
				code, out, errOut = run(t, "verify", "--insecure", "oci://"+ref, "--key", otherPub)
				if code != 1 || !strings.Contains(out, "NOT verified") {
					t.Fatalf("informer-host verify with a key that did not sign: exit %d, want 1: %s%s", code, out, errOut)
				}
			})
		}
		ref := pushModule(t, reg, dir, "unsigned")
		code, out, errOut := run(t, "verify", "--insecure", "oci://"+ref, "--key", pub)
		if code != 1 || !strings.Contains(out, "NOT verified") {
			t.Fatalf("informer-host verify of an unsigned digest: exit %d, want 1: %s%s", code, out, errOut)
		}
	})
}

// What informer-host sign signs (a sigstore bundle referrer, the only
// form it writes), cosign verify accepts with cosign.pub, offline: no
// transparency log, and a trusted root with nothing in it, since for a
// bundle cosign v2 wants one and without --trusted-root fetches the
// public instance's by TUF (offline it then fails: "trusted root is
// required when using new bundle format").
func TestSignVerifiedByCosign(t *testing.T) {
	cosign := outsideClient(t, "cosign", "github.com/sigstore/cosign/v2")
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir, key, pub, otherPub := signingDir(t, cosign)
		root := filepath.Join(dir, "trusted_root.json")
		if err := os.WriteFile(root, []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		ref := pushModule(t, reg, dir, "signed")
		t.Setenv("COSIGN_PASSWORD", cosignPassword)
		if code, out, errOut := run(t, "sign", "--insecure", "oci://"+ref, "--key", key); code != 0 {
			t.Fatalf("informer-host sign: exit %d: %s%s", code, out, errOut)
		}
		verify := func(key, ref string) (string, error) {
			return tool(t, dir, nil, cosign, "verify", "--insecure-ignore-tlog=true", "--allow-insecure-registry",
				"--trusted-root", root, "--key", key, ref)
		}
		if out, err := verify(pub, ref); err != nil || !strings.Contains(out, "The signatures were verified against the specified public key") {
			t.Fatalf("cosign verify: %v\n%s", err, out)
		}
		// cosign refuses what it should: the same digest under a key that
		// did not sign it, and a digest nobody signed.
		if out, err := verify(otherPub, ref); err == nil {
			t.Fatalf("cosign verify with a key that did not sign accepted:\n%s", out)
		}
		if out, err := verify(pub, pushModule(t, reg, dir, "unsigned")); err == nil {
			t.Fatalf("cosign verify of an unsigned digest accepted:\n%s", out)
		}
	})
}
