package ociartifact_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
)

// module is a stand-in for a plugin: this package moves bytes and never
// runs them, so any bytes do; these start as a module does.
func module(tag string) []byte {
	return append([]byte("\x00asm\x01\x00\x00\x00"), []byte(strings.Repeat(tag, 100))...)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// client is a Client for test registries on loopback (plain HTTP, so
// marked insecure), with o's other settings.
func client(t *testing.T, o ociartifact.Options, hosts ...string) *ociartifact.Client {
	t.Helper()
	if o.Registries == nil {
		o.Registries = map[string]ociartifact.Registry{}
	}
	for _, h := range hosts {
		r := o.Registries[h]
		r.Insecure = true
		o.Registries[h] = r
	}
	c, err := ociartifact.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Push writes the CNCF form, Pull reads it back by tag and by digest,
// and Resolve turns the tag into the digest Push returned, against both
// registries.
func TestPushPullResolve(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		ctx := context.Background()
		c := client(t, ociartifact.Options{}, reg.Host)
		wasm := module("a")
		ref := "oci://" + reg.Ref("plugins/pod-logger:v1")
		desc, err := c.Push(ctx, wasm, ref, map[string]string{ociartifact.AnnotationABIVersion: "v1", ociartifact.AnnotationTitle: "pod-logger.wasm"})
		if err != nil {
			t.Fatal(err)
		}
		if desc.MediaType != string(types.OCIManifestSchema1) || !strings.HasPrefix(desc.Digest, "sha256:") {
			t.Errorf("push descriptor %+v", desc)
		}
		got, err := c.Resolve(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if got.Digest != desc.Digest {
			t.Errorf("resolve: %s, push said %s", got.Digest, desc.Digest)
		}
		for _, r := range []string{ref, reg.Ref("plugins/pod-logger@" + desc.Digest)} {
			a, err := c.Pull(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes, wasm) || a.ModuleDigest != sha(wasm) || a.LayerDigest != sha(wasm) {
				t.Errorf("pull %s: module %s (%d bytes), want %s", r, a.ModuleDigest, len(a.Bytes), sha(wasm))
			}
			if a.Format != ociartifact.FormatCNCF || a.ManifestDigest != desc.Digest {
				t.Errorf("pull %s: format %s manifest %s", r, a.Format, a.ManifestDigest)
			}
			if a.Annotations[ociartifact.AnnotationABIVersion] != "v1" || a.Annotations[ociartifact.AnnotationCreated] == "" {
				t.Errorf("pull %s: annotations %v", r, a.Annotations)
			}
		}
		// A digest reference resolves to itself without asking.
		before := len(reg.Requests())
		d := reg.Ref("plugins/pod-logger@" + desc.Digest)
		if got, err := c.Resolve(ctx, d); err != nil || got.Digest != desc.Digest {
			t.Errorf("resolve %s: %v %v", d, got, err)
		}
		if n := len(reg.Requests()); n != before {
			t.Errorf("resolving a digest made %d requests", n-before)
		}
	})
}

func tarGz(t *testing.T, gz bool, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w = &buf
	var zw *gzip.Writer
	tw := (*tar.Writer)(nil)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(w)
	}
	for n, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

// image pushes a manifest of mediaType with one config of configType and
// the given layers, and returns its tag's reference.
func image(t *testing.T, reg *registrytest.Server, repo string, mediaType, configType types.MediaType, layers map[types.MediaType][]byte) string {
	t.Helper()
	cfg := reg.PutBlob(t, repo, []byte(`{"architecture":"wasm","os":"wasip1"}`))
	cfg.MediaType = configType
	m := v1.Manifest{SchemaVersion: 2, MediaType: mediaType, Config: cfg}
	for mt, b := range layers {
		d := reg.PutBlob(t, repo, b)
		d.MediaType = mt
		m.Layers = append(m.Layers, d)
	}
	reg.PutManifest(t, repo, "v1", mediaType, m)
	return reg.Ref(repo + ":v1")
}

// Besides its own, Pull reads one application/wasm layer under any other
// config (oras push's default), wasm-to-oci's form and Istio's image form
// (docker or OCI, tar+gzip or tar, plugin.wasm inside).
func TestPullFormats(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		ctx := context.Background()
		c := client(t, ociartifact.Options{}, reg.Host)
		wasm := module("b")
		for _, tc := range []struct {
			name   string
			ref    string
			format ociartifact.Format
		}{
			// oras push's default (OCI 1.1: the empty config) and its
			// --image-spec v1.0 (the unknown config): the application/wasm
			// layer alone says what it holds.
			{"oras default", image(t, reg, "oras", types.OCIManifestSchema1, "application/vnd.oci.empty.v1+json",
				map[types.MediaType][]byte{ociartifact.LayerMediaType: wasm}), ociartifact.FormatWasmLayer},
			{"oras image-spec v1.0", image(t, reg, "oras-v10", types.OCIManifestSchema1, "application/vnd.unknown.config.v1+json",
				map[types.MediaType][]byte{ociartifact.LayerMediaType: wasm}), ociartifact.FormatWasmLayer},
			{"wasm-to-oci", image(t, reg, "w2o", types.OCIManifestSchema1, "application/vnd.wasm.config.v1+json",
				map[types.MediaType][]byte{ociartifact.WasmToOCILayerMediaType: wasm}), ociartifact.FormatWasmToOCI},
			{"docker image", image(t, reg, "istio-docker", types.DockerManifestSchema2, types.DockerConfigJSON,
				map[types.MediaType][]byte{types.DockerLayer: tarGz(t, true, map[string][]byte{"plugin.wasm": wasm})}), ociartifact.FormatImage},
			{"oci image, plain tar", image(t, reg, "istio-oci", types.OCIManifestSchema1, types.OCIConfigJSON,
				map[types.MediaType][]byte{types.OCIUncompressedLayer: tarGz(t, false, map[string][]byte{"./plugin.wasm": wasm})}), ociartifact.FormatImage},
		} {
			a, err := c.Pull(ctx, tc.ref)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if a.Format != tc.format || !bytes.Equal(a.Bytes, wasm) || a.ModuleDigest != sha(wasm) {
				t.Errorf("%s: format %s, module %s, want %s %s", tc.name, a.Format, a.ModuleDigest, tc.format, sha(wasm))
			}
		}
		// An image without plugin.wasm says what it has.
		ref := image(t, reg, "istio-empty", types.OCIManifestSchema1, types.OCIConfigJSON,
			map[types.MediaType][]byte{types.OCILayer: tarGz(t, true, map[string][]byte{"main.wasm": wasm})})
		if _, err := c.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "no plugin.wasm") || !strings.Contains(err.Error(), "main.wasm") {
			t.Errorf("image without plugin.wasm: %v", err)
		}
	})
}

// Anything else is refused with the media types it has.
func TestPullUnknownMediaTypes(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		c := client(t, ociartifact.Options{}, reg.Host)
		for _, tc := range []struct {
			name   string
			config types.MediaType
			layers map[types.MediaType][]byte
		}{
			{"a helm chart", "application/vnd.cncf.helm.config.v1+json", map[types.MediaType][]byte{"application/vnd.cncf.helm.chart.content.v1.tar+gzip": []byte("chart")}},
			{"two layers", types.OCIConfigJSON, map[types.MediaType][]byte{types.OCILayer: tarGz(t, true, nil), "application/wasm": module("c")}},
		} {
			repo := strings.ReplaceAll(tc.name, " ", "-")
			ref := image(t, reg, repo, types.OCIManifestSchema1, tc.config, tc.layers)
			_, err := c.Pull(context.Background(), ref)
			if err == nil {
				t.Errorf("%s: pulled", tc.name)
				continue
			}
			for _, want := range []string{"not a Wasm module artifact", string(tc.config), "informer-host push"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error lacks %q: %v", tc.name, want, err)
				}
			}
			for mt := range tc.layers {
				if !strings.Contains(err.Error(), string(mt)) {
					t.Errorf("%s: error lacks layer type %q: %v", tc.name, mt, err)
				}
			}
		}
	})
}

// A layer whose descriptor is over the limit is refused before its blob
// is asked for (go-containerregistry's registry takes a manifest whose
// blobs it does not have, so the layer need not exist).
func TestPullHugeLayerRefusedBeforeDownload(t *testing.T) {
	reg := registrytest.GGCR(t)
	c := client(t, ociartifact.Options{MaxModuleSize: 1 << 20}, reg.Host)
	cfg := reg.PutBlob(t, "huge", []byte(`{}`))
	cfg.MediaType = ociartifact.ConfigMediaType
	huge := v1.Descriptor{MediaType: ociartifact.LayerMediaType, Size: 8 << 30,
		Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}}
	reg.PutManifest(t, "huge", "v1", types.OCIManifestSchema1, v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cfg, Layers: []v1.Descriptor{huge}})
	_, err := c.Pull(context.Background(), reg.Ref("huge:v1"))
	if err == nil || !strings.Contains(err.Error(), "over the limit of 1048576") || !strings.Contains(err.Error(), "refused before download") {
		t.Fatalf("pull of an 8 GiB layer: %v", err)
	}
	for _, r := range reg.Requests() {
		if strings.Contains(r, "/blobs/"+huge.Digest.String()) {
			t.Errorf("the huge blob was requested: %s", r)
		}
	}
}

// A registry that serves other bytes than the digest names, more bytes
// than the descriptor says, or garbage for a manifest is an error, never
// a module.
func TestPullLyingRegistry(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		ctx := context.Background()
		c := client(t, ociartifact.Options{}, reg.Host)
		wasm := module("d")
		ref := reg.Ref("liar:v1")
		if _, err := c.Push(ctx, wasm, ref, nil); err != nil {
			t.Fatal(err)
		}
		blobPath := "/blobs/" + sha(wasm)
		serve := func(body []byte) {
			reg.Tamper(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, blobPath) {
					return false
				}
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(body)
				return true
			})
		}
		// Same length, other content.
		evil := bytes.Clone(wasm)
		evil[len(evil)-1] ^= 1
		serve(evil)
		if _, err := c.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
			t.Errorf("wrong-digest layer: %v", err)
		}
		// More than the descriptor says.
		serve(append(bytes.Clone(wasm), make([]byte, 4096)...))
		if _, err := c.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("oversized layer: %v", err)
		}
		// Garbage where the manifest is.
		reg.Tamper(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				return false
			}
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			w.Write([]byte("<html>garbage</html>"))
			return true
		})
		if _, err := c.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "not JSON") {
			t.Errorf("garbage manifest: %v", err)
		}
		reg.Tamper(nil)
		if _, err := c.Pull(ctx, ref); err != nil {
			t.Errorf("after the registry stops lying: %v", err)
		}
	})
}

// A registry that is down is an error naming it, from Resolve and Pull.
func TestRegistryDown(t *testing.T) {
	reg := registrytest.GGCR(t)
	c := client(t, ociartifact.Options{}, reg.Host)
	reg.Close()
	ref := reg.Ref("gone:v1")
	if _, err := c.Resolve(context.Background(), ref); err == nil || !strings.Contains(err.Error(), reg.Host) {
		t.Errorf("resolve with the registry down: %v", err)
	}
	if _, err := c.Pull(context.Background(), ref); err == nil || !strings.Contains(err.Error(), reg.Host) {
		t.Errorf("pull with the registry down: %v", err)
	}
}

// A registry that wants credentials gets them from the docker config;
// without, the error says what to give.
func TestAuth(t *testing.T) {
	reg := registrytest.Distribution(t, registrytest.Options{User: "alice", Password: "s3cret"})
	ctx := context.Background()
	ref := reg.Ref("private/p:v1")
	wasm := module("e")
	good := client(t, ociartifact.Options{DockerConfig: reg.DockerConfig(t, "alice", "s3cret")}, reg.Host)
	if _, err := good.Push(ctx, wasm, ref, nil); err != nil {
		t.Fatal(err)
	}
	if a, err := good.Pull(ctx, ref); err != nil || !bytes.Equal(a.Bytes, wasm) {
		t.Fatalf("pull with credentials: %v", err)
	}
	anon := client(t, ociartifact.Options{}, reg.Host)
	_, err := anon.Pull(ctx, ref)
	if err == nil || !strings.Contains(err.Error(), "wants credentials") || !strings.Contains(err.Error(), "no docker config is given") {
		t.Errorf("pull without credentials: %v", err)
	}
	other := registrytest.GGCR(t)
	wrongHost := client(t, ociartifact.Options{DockerConfig: other.DockerConfig(t, "alice", "s3cret")}, reg.Host)
	if _, err := wrongHost.Resolve(ctx, ref); err == nil || !strings.Contains(err.Error(), "has no auths entry for "+reg.Host) {
		t.Errorf("resolve with a config for another host: %v", err)
	}
	wrongPass := client(t, ociartifact.Options{DockerConfig: reg.DockerConfig(t, "alice", "guess")}, reg.Host)
	if _, err := wrongPass.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "that the registry refused") {
		t.Errorf("pull with a wrong password: %v", err)
	}
}

// Mirrors are tried in order, then the registry: a mirror that has the
// module serves it while the registry is down, one that lacks it falls
// through.
func TestMirrors(t *testing.T) {
	ctx := context.Background()
	origin := registrytest.Distribution(t, registrytest.Options{})
	mirror := registrytest.GGCR(t)
	empty := registrytest.GGCR(t)
	wasm := module("f")
	push := client(t, ociartifact.Options{}, origin.Host, mirror.Host)
	if _, err := push.Push(ctx, wasm, origin.Ref("team/p:v1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := push.Push(ctx, wasm, mirror.Ref("cache/team/p:v1"), nil); err != nil {
		t.Fatal(err)
	}
	c := client(t, ociartifact.Options{Registries: map[string]ociartifact.Registry{
		origin.Host: {Mirrors: []string{empty.Host, mirror.Host + "/cache"}},
	}}, origin.Host, mirror.Host, empty.Host)
	a, err := c.Pull(ctx, origin.Ref("team/p:v1"))
	if err != nil {
		t.Fatal(err)
	}
	if a.From != mirror.Ref("cache/team/p:v1") || !bytes.Equal(a.Bytes, wasm) {
		t.Errorf("pulled from %s", a.From)
	}
	// A mirror that serves other bytes than the digest names is passed
	// over for the next place.
	mirror.Tamper(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+sha(wasm)) {
			w.Write(bytes.Repeat([]byte("x"), len(wasm)))
			return true
		}
		return false
	})
	if a, err := c.Pull(ctx, origin.Ref("team/p:v1")); err != nil || a.From != origin.Ref("team/p:v1") || !bytes.Equal(a.Bytes, wasm) {
		t.Errorf("pull past a lying mirror: from %v, %v", a, err)
	}
	mirror.Tamper(nil)
	origin.Close()
	if _, err := c.Resolve(ctx, origin.Ref("team/p:v1")); err != nil {
		t.Errorf("resolve through the mirror with the registry down: %v", err)
	}
	mirror.Close()
	if _, err := c.Pull(ctx, origin.Ref("team/p:v1")); err == nil || !strings.Contains(err.Error(), "mirror") {
		t.Errorf("pull with mirrors and registry down: %v", err)
	}
}

// An index with exactly one module manifest yields it; with two, the
// error lists them.
func TestPullIndex(t *testing.T) {
	registrytest.Each(t, func(t *testing.T, reg *registrytest.Server) {
		ctx := context.Background()
		c := client(t, ociartifact.Options{}, reg.Host)
		wasm := module("g")
		d1, err := c.Push(ctx, wasm, reg.Ref("idx:wasm"), nil)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := c.Push(ctx, module("h"), reg.Ref("idx:other-wasm"), nil)
		if err != nil {
			t.Fatal(err)
		}
		other := image(t, reg, "idx", types.OCIManifestSchema1, types.OCIConfigJSON, map[types.MediaType][]byte{types.OCILayer: tarGz(t, true, map[string][]byte{"bin/sh": []byte("x")})})
		od, err := c.Resolve(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		desc := func(d ociartifact.Descriptor) v1.Descriptor {
			h, _ := v1.NewHash(d.Digest)
			return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: d.Size}
		}
		d1.Size, d2.Size = mustSize(t, c, reg.Ref("idx:wasm")), mustSize(t, c, reg.Ref("idx:other-wasm"))
		one := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{desc(od), desc(d1)}}
		idx := reg.PutManifest(t, "idx", "one", types.OCIImageIndex, one)
		a, err := c.Pull(ctx, reg.Ref("idx:one"))
		if err != nil {
			t.Fatal(err)
		}
		if a.IndexDigest != idx || a.ManifestDigest != d1.Digest || !bytes.Equal(a.Bytes, wasm) {
			t.Errorf("index pull: index %s manifest %s", a.IndexDigest, a.ManifestDigest)
		}
		two := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{desc(d1), desc(d2)}}
		reg.PutManifest(t, "idx", "two", types.OCIImageIndex, two)
		if _, err := c.Pull(ctx, reg.Ref("idx:two")); err == nil || !strings.Contains(err.Error(), "has 2 Wasm module manifests") || !strings.Contains(err.Error(), d2.Digest) {
			t.Errorf("index of two modules: %v", err)
		}
	})
}

func mustSize(t *testing.T, c *ociartifact.Client, ref string) int64 {
	t.Helper()
	d, err := c.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return d.Size
}
