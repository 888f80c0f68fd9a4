package pluginsource

import (
	"bytes"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/sigverify"
	"github.com/informer-host/informer-host/internal/testenv"
)

// A bundle of an image index serves a source pinned to
// the index digest, and a tag that names the index, with the registry
// gone: bundle save, registry down, bundle load into an empty cache, the
// manager starts both.
func TestBundleOfIndexStartsWithRegistryDown(t *testing.T) {
	ctx := t.Context()
	reg := registrytest.GGCR(t)
	c, err := ociartifact.New(ociartifact.Options{Registries: map[string]ociartifact.Registry{reg.Host: {Insecure: true}}})
	if err != nil {
		t.Fatal(err)
	}
	wasm := []byte("\x00asm\x01\x00\x00\x00 the module in an index")
	if _, err := c.Push(ctx, wasm, reg.Ref("idx:wasm"), nil); err != nil {
		t.Fatal(err)
	}
	d, err := c.Resolve(ctx, reg.Ref("idx:wasm"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := v1.NewHash(d.Digest)
	index := reg.PutManifest(t, "idx", "one", types.OCIImageIndex, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{{MediaType: types.OCIManifestSchema1, Digest: h, Size: d.Size}}})
	pinned, tagged := reg.Ref("idx@"+index), reg.Ref("idx:one")
	var buf bytes.Buffer
	if _, err := c.SaveBundle(ctx, []string{pinned, tagged}, &buf); err != nil {
		t.Fatal(err)
	}
	reg.Close()

	dir := t.TempDir()
	if _, err := ociartifact.LoadBundle(ctx, bytes.NewReader(buf.Bytes()), ociartifact.Store{Dir: dir}, 0); err != nil {
		t.Fatal(err)
	}
	st, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Path(index); !ok {
		t.Errorf("the cache does not find the index digest %s", index)
	}
	cfg := parse(t, 0, "  - file: pinned.wasm\n    source: oci://"+pinned, "  - file: tagged.wasm\n    source: oci://"+tagged)
	host := newFakeHost()
	m := newManager(t, host, &OCI{Client: c}, st, nil)
	m.Apply(ctx, cfg)
	for _, p := range []string{"pinned.wasm", "tagged.wasm"} {
		testenv.Eventually(t, p+" to run from the bundle", func() bool {
			return host.get(p) == string(wasm) && m.Status()[p].RunningDigest == index
		})
	}
}

// Signatures travel with bundles: a module signed in a registry, saved
// in a bundle, loaded into a fresh cache with the registry gone,
// verifies under a required key policy from the cache alone, and the
// daemon's manager starts it; an unsigned module in the same bundle is
// refused with a reason that says the bundle holds no signature and how
// to make one that does.
func TestBundleCarriesSignatures(t *testing.T) {
	ctx := t.Context()
	reg := registrytest.GGCR(t)
	c, err := ociartifact.New(ociartifact.Options{Registries: map[string]ociartifact.Registry{reg.Host: {Insecure: true}}})
	if err != nil {
		t.Fatal(err)
	}
	signed, unsigned := []byte("\x00asm\x01\x00\x00\x00 signed"), []byte("\x00asm\x01\x00\x00\x00 unsigned")
	digests := map[string]string{}
	legacy := []byte("\x00asm\x01\x00\x00\x00 signed the legacy way")
	for repo, b := range map[string][]byte{"sig/a": signed, "sig/b": unsigned, "sig/c": legacy} {
		d, err := c.Push(ctx, b, reg.Ref(repo+":v1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		digests[repo] = d.Digest
	}
	keyDir := t.TempDir()
	priv := writeKeyPair(t, keyDir, "cosign.pub")
	pubFile := filepath.Join(keyDir, "cosign.pub")
	if _, err := sigverify.SignWithKey(ctx, reg.Ref("sig/a"), digests["sig/a"], priv, sigverify.WithRemoteOptions(c.RemoteOptions(ctx)...)); err != nil {
		t.Fatal(err)
	}
	pushLegacySignature(t, c, reg.Ref("sig/c"), digests["sig/c"], priv)
	var buf bytes.Buffer
	if _, err := c.SaveBundle(ctx, []string{reg.Ref("sig/a:v1"), reg.Ref("sig/b:v1"), reg.Ref("sig/c:v1")}, &buf); err != nil {
		t.Fatal(err)
	}
	reg.Close() // the air gap: no registry from here on

	dir := t.TempDir()
	if _, err := ociartifact.LoadBundle(ctx, bytes.NewReader(buf.Bytes()), ociartifact.Store{Dir: dir}, 0); err != nil {
		t.Fatal(err)
	}
	local := sigverify.WithLocalLayout(ociartifact.Store{Dir: dir}.SignatureDir())
	v, err := sigverify.New(sigverify.Policy{Required: true, Keys: []string{pubFile}}, local, sigverify.WithRemoteOptions(c.RemoteOptions(ctx)...))
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"sig/a", "sig/c"} {
		res, err := v.Verify(ctx, reg.Ref(repo), digests[repo])
		if err != nil || !res.Verified {
			t.Fatalf("the signed module %s from the bundle: %+v %v", repo, res, err)
		}
	}
	res, err := v.Verify(ctx, reg.Ref("sig/b"), digests["sig/b"])
	if err == nil || res.Verified || !strings.Contains(err.Error(), "no signature of "+digests["sig/b"]) || !strings.Contains(err.Error(), "bundle save") {
		t.Errorf("the unsigned module from the bundle: %+v %v", res, err)
	}

	// The daemon's path: a manager whose verifier reads the cache, with
	// the pull policy an air-gapped site uses (a tag's cached digest, not
	// resolved again) and with the default, Always, whose resolve fails
	// with the registry gone: the cached version starts all the same,
	// verified from the cache.
	for _, pull := range []string{"IfNotPresent", "Always"} {
		t.Run(pull, func(t *testing.T) {
			cfg := parse(t, 0,
				"  - file: a.wasm\n    source: oci://"+reg.Ref("sig/a:v1")+"\n    pullPolicy: "+pull+"\n    verify: {required: true, keys: ["+pubFile+"]}",
				"  - file: b.wasm\n    source: oci://"+reg.Ref("sig/b:v1")+"\n    pullPolicy: "+pull+"\n    verify: {required: true, keys: ["+pubFile+"]}")
			st, err := NewDirStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			host := newFakeHost()
			oci := &OCI{Client: c}
			m := newManager(t, host, oci, st, NewSigstore(oci, WithBundleSignatures(dir)))
			m.Apply(ctx, cfg)
			testenv.Eventually(t, "the signed module to run verified", func() bool {
				return host.get("a.wasm") == string(signed) && running(m, "a.wasm").Verified
			})
			if host.get("b.wasm") != "" {
				t.Errorf("the unsigned module runs under verify: required")
			}
		})
	}
}

// pushLegacySignature signs digest as cosign's legacy form: the tag
// sha256-<hex>.sig holding a simple-signing payload, its signature in
// the layer's annotation.
func pushLegacySignature(t *testing.T, c *ociartifact.Client, repo, digest string, privPEM []byte) {
	t.Helper()
	payload := []byte(`{"critical":{"identity":{"docker-reference":"` + repo + `"},"image":{"docker-manifest-digest":"` + digest +
		`"},"type":"cosign container image signature"},"optional":null}`)
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.LoadDefaultSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1),
		mutate.Addendum{Layer: static.NewLayer(payload, sigverify.SimpleSigningMediaType),
			Annotations: map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)}})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := c.ParseReference(repo + ":" + strings.Replace(digest, ":", "-", 1) + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, c.RemoteOptions(t.Context())...); err != nil {
		t.Fatal(err)
	}
}
