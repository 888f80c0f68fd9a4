package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/testenv"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// push publishes a module with the ABI version and capabilities it
// imports; pull gets the same bytes back; inspect oci:// reports the
// artifact and then what inspect reports of a file; against both
// registries.
func TestPushPullInspectCommands(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		dir := t.TempDir()
		wasm := testenv.WAT(t, "../../host/testdata/fixtures/state.wat")
		file := filepath.Join(dir, "state.wasm")
		if err := os.WriteFile(file, wasm, 0o644); err != nil {
			t.Fatal(err)
		}
		ref := "oci://" + reg.Ref("plugins/state:v1")
		code, out, errOut := run(t, "push", "--insecure", "--annotation", "team=storefront", file, ref)
		if code != 0 {
			t.Fatalf("push: exit %d: %s", code, errOut)
		}
		digest := strings.TrimSpace(out)
		if !strings.HasPrefix(digest, "sha256:") || len(digest) != 71 {
			t.Fatalf("push printed %q, want the manifest digest", out)
		}

		pulled := filepath.Join(dir, "pulled.wasm")
		code, out, errOut = run(t, "pull", "--insecure", "-o", pulled, ref)
		if code != 0 {
			t.Fatalf("pull: exit %d: %s", code, errOut)
		}
		got, err := os.ReadFile(pulled)
		if err != nil || !bytes.Equal(got, wasm) {
			t.Fatalf("pulled file differs from the pushed one (%v)", err)
		}
		if !strings.Contains(out, string(ociartifact.FormatCNCF)) || !strings.Contains(out, digest) {
			t.Errorf("pull output: %s", out)
		}

		code, out, errOut = run(t, "inspect", "--insecure", ref)
		if code != 0 {
			t.Fatalf("inspect: exit %d: %s\n%s", code, errOut, out)
		}
		for _, want := range []string{
			"manifest:   " + digest,
			"format:     cncf-wasm",
			"module:     sha256:",
			ociartifact.AnnotationABIVersion + "=v1",
			ociartifact.AnnotationCapabilities + "=state",
			"team=storefront",
			"plugin:     state.wasm",
			"requests:   state",
			"loads:      yes",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("inspect output lacks %q:\n%s", want, out)
			}
		}
		code, out, _ = run(t, "inspect", "--insecure", "--json", ref)
		var rr struct {
			ManifestDigest string `json:"manifestDigest"`
			Module         struct {
				Loads     bool     `json:"loads"`
				Requested []string `json:"requested"`
			} `json:"module"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rr) != nil || rr.ManifestDigest != digest || !rr.Module.Loads {
			t.Errorf("inspect --json: exit %d: %s", code, out)
		}
	})
}

// A module that would not load is not pushed.
func TestPushRefusesABrokenModule(t *testing.T) {
	reg := registrytest.GGCR(t)
	file := filepath.Join(t.TempDir(), "garbage.wasm")
	os.WriteFile(file, []byte("garbage"), 0o644)
	code, _, errOut := run(t, "push", "--insecure", file, "oci://"+reg.Ref("p:v1"))
	if code != 1 || !strings.Contains(errOut, "would not load, so it is not pushed") {
		t.Errorf("push of garbage: exit %d: %s", code, errOut)
	}
	for _, r := range reg.Requests() {
		if strings.HasPrefix(r, "PUT") || strings.HasPrefix(r, "POST") {
			t.Errorf("a broken module reached the registry: %s", r)
		}
	}
}

// bundle save writes what bundle load puts into a cache, which then
// holds each ref's module as its source's last good version, with the
// registry gone.
func TestBundleCommands(t *testing.T) {
	reg := registrytest.Distribution(t, registrytest.Options{})
	dir := t.TempDir()
	refs, modules := pushFixtures(t, reg, dir, "healthy", "state")
	priv, _ := writeKeyPair(t, dir, "cosign")
	if code, out, errOut := run(t, "sign", "--insecure", refs[0], "--key", priv); code != 0 {
		t.Fatalf("sign: exit %d: %s%s", code, out, errOut)
	}
	tarFile := filepath.Join(dir, "plugins.tar")
	code, out, errOut := run(t, append([]string{"bundle", "save", "--insecure", "-o", tarFile}, refs...)...)
	if code != 0 || !strings.Contains(out, "2 module(s)") {
		t.Fatalf("bundle save: exit %d: %s%s", code, out, errOut)
	}
	if !strings.Contains(out, refs[0]+": 1 signature(s)") || !strings.Contains(out, refs[1]+": 0 signature(s)") {
		t.Errorf("bundle save does not say how many signatures it saved of each module: %s", out)
	}
	reg.Close()
	cache := filepath.Join(dir, "cache")
	code, out, errOut = run(t, "bundle", "load", "--cache", cache, tarFile)
	if code != 0 {
		t.Fatalf("bundle load: exit %d: %s", code, errOut)
	}
	// The signature travels with its module, into the cache's layout.
	if !strings.Contains(out, "signature ") || !strings.Contains(out, filepath.Join(cache, "signatures")) {
		t.Errorf("bundle load output names no signature in the cache:\n%s", out)
	}
	store := ociartifact.Store{Dir: cache}
	for _, ref := range refs {
		if !strings.Contains(out, strings.TrimPrefix(ref, "oci://")+": sha256:") {
			t.Errorf("bundle load output lacks %s:\n%s", ref, out)
		}
		rec, ok, err := store.LoadRecord(ref)
		if err != nil || !ok {
			t.Errorf("no record of %s in the cache: %v", ref, err)
			continue
		}
		if b, err := store.Read(rec.ModuleDigest, 1<<20); err != nil || !bytes.Equal(b, modules[ref]) {
			t.Errorf("module of %s: %v", ref, err)
		}
	}
	if code, _, errOut := run(t, "bundle", "load", tarFile); code != 2 || !strings.Contains(errOut, "--cache DIR or --config FILE is required") {
		t.Errorf("bundle load without --cache: exit %d: %s", code, errOut)
	}
}

// pushFixtures pushes each host fixture named (…/fixtures/NAME.wat) to
// reg as air/NAME:v1 with the push command, and returns the references
// in order and each one's module.
func pushFixtures(t *testing.T, reg *registrytest.Server, dir string, names ...string) ([]string, map[string][]byte) {
	t.Helper()
	return pushFixturesTo(t, reg, dir, "", names...)
}

// pushFixturesTo is pushFixtures with the credentials of a docker config
// ("": none).
func pushFixturesTo(t *testing.T, reg *registrytest.Server, dir, dockerConfig string, names ...string) ([]string, map[string][]byte) {
	t.Helper()
	var refs []string
	modules := map[string][]byte{}
	for _, f := range names {
		file := filepath.Join(dir, f+".wasm")
		wasm := testenv.WAT(t, "../../host/testdata/fixtures/"+f+".wat")
		os.WriteFile(file, wasm, 0o644)
		ref := "oci://" + reg.Ref("air/"+f+":v1")
		args := []string{"push", "--insecure", file, ref}
		if dockerConfig != "" {
			args = append(args, "--docker-config", dockerConfig)
		}
		if code, _, errOut := run(t, args...); code != 0 {
			t.Fatalf("push %s: %s", f, errOut)
		}
		refs = append(refs, ref)
		modules[ref] = wasm
	}
	return refs, modules
}

// bundle save --config takes every oci:// source the config names, with
// the config's registries; bundle load --config fills the cache that
// config's daemon reads, where its plugin sources find each one as their
// last good version with no registry.
func TestBundleCommandsFromConfig(t *testing.T) {
	reg := registrytest.Distribution(t, registrytest.Options{})
	dir := t.TempDir()
	cfgText := "apiVersion: informer-host/v1\nresources: [{name: cms, version: v1, resource: configmaps}]\nplugins:\n" +
		"  sourceCache: cache\n  registries:\n    " + reg.Host + ": {insecure: true}\n  modules:\n"
	refs, modules := pushFixtures(t, reg, dir, "healthy", "state")
	for i, f := range []string{"healthy", "state"} {
		cfgText += "  - file: " + f + ".wasm\n    source: " + refs[i] + "\n"
	}
	cfgFile := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfgFile, []byte(cfgText), 0o644)
	tarFile := filepath.Join(dir, "plugins.tar")
	if code, out, errOut := run(t, "bundle", "save", "--config", cfgFile, "-o", tarFile); code != 0 || !strings.Contains(out, "2 module(s)") {
		t.Fatalf("bundle save --config: exit %d: %s%s", code, out, errOut)
	}
	reg.Close()
	if code, out, errOut := run(t, "bundle", "load", "--config", cfgFile, tarFile); code != 0 {
		t.Fatalf("bundle load --config: exit %d: %s%s", code, out, errOut)
	}
	store, err := pluginsource.NewDirStore(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	for ref, wasm := range modules {
		rec, ok := store.LastGood(ref)
		if !ok {
			t.Errorf("the daemon's source cache has no last good version of %s", ref)
			continue
		}
		p, ok := store.Path(rec.Digest)
		if !ok {
			t.Errorf("%s: last good %s is not in the cache", ref, rec.Digest)
			continue
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, wasm) {
			t.Errorf("%s: the cached module differs from the pushed one (%v)", ref, err)
		}
	}
	os.WriteFile(filepath.Join(dir, "none.yaml"), []byte("apiVersion: informer-host/v1\nresources: [{name: cms, version: v1, resource: configmaps}]\n"), 0o644)
	if code, _, errOut := run(t, "bundle", "save", "--config", filepath.Join(dir, "none.yaml"), "-o", tarFile); code != 1 || !strings.Contains(errOut, "names no oci:// source") {
		t.Errorf("bundle save of a config without sources: exit %d: %s", code, errOut)
	}
}

// The failures a person meets say what to do: a registry that wants
// credentials, one that is down, --insecure for a remote host, a pull of
// something that is not a module.
func TestRegistryCommandFailures(t *testing.T) {
	priv := registrytest.Distribution(t, registrytest.Options{User: "u", Password: "p"})
	code, _, errOut := run(t, "pull", "--insecure", "oci://"+priv.Ref("x:v1"))
	if code != 1 || !strings.Contains(errOut, "wants credentials") || !strings.Contains(errOut, "--docker-config") {
		t.Errorf("pull without credentials: exit %d: %s", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "healthy.wasm")
	os.WriteFile(file, testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat"), 0o644)
	cfg := priv.DockerConfig(t, "u", "p")
	if code, _, errOut := run(t, "push", "--insecure", "--docker-config", cfg, file, "oci://"+priv.Ref("x:v1")); code != 0 {
		t.Errorf("push with credentials: %s", errOut)
	}
	if code, _, errOut := run(t, "pull", "--insecure", "--docker-config", cfg, "-o", filepath.Join(t.TempDir(), "x.wasm"), "oci://"+priv.Ref("x:v1")); code != 0 {
		t.Errorf("pull with credentials: %s", errOut)
	}

	down := registrytest.GGCR(t)
	down.Close()
	if code, _, errOut := run(t, "inspect", "--insecure", "oci://"+down.Ref("x:v1")); code != 1 || !strings.Contains(errOut, down.Host) {
		t.Errorf("inspect with the registry down: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, "pull", "--insecure", "oci://registry.example.com/x:v1"); code != 1 || !strings.Contains(errOut, "only for a loopback host") {
		t.Errorf("--insecure for a remote registry: exit %d: %s", code, errOut)
	}
	if code, _, _ := run(t, "pull", "registry.example.com/x:v1"); code != 2 {
		t.Errorf("pull of a reference without oci://: exit %d", code)
	}

	reg := registrytest.GGCR(t)
	cfgBlob := reg.PutBlob(t, "chart", []byte("{}"))
	cfgBlob.MediaType = "application/vnd.cncf.helm.config.v1+json"
	layer := reg.PutBlob(t, "chart", []byte("chart"))
	layer.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	reg.PutManifest(t, "chart", "v1", "application/vnd.oci.image.manifest.v1+json", map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cfgBlob, "layers": []any{layer}})
	code, _, errOut = run(t, "pull", "--insecure", "oci://"+reg.Ref("chart:v1"))
	if code != 1 || !strings.Contains(errOut, "application/vnd.cncf.helm.chart.content.v1.tar+gzip") {
		t.Errorf("pull of a helm chart: exit %d: %s", code, errOut)
	}
}
