package pluginsource

import (
	"bytes"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Issue 31 item 6: a bundle of an image index serves a source pinned to
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
	if err := c.SaveBundle(ctx, []string{pinned, tagged}, &buf); err != nil {
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
