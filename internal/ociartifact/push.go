package ociartifact

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// wasmConfig is the CNCF Wasm artifact's config: a module for WASI
// preview 1 (os wasip1), its one layer named.
type wasmConfig struct {
	Created      string   `json:"created,omitempty"`
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	LayerDigests []string `json:"layerDigests"`
}

// rawManifest is a manifest Push has written itself.
type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// Push writes wasm to ref (a tag or a digest) in the CNCF TAG Runtime
// form: an OCI image manifest, config ConfigMediaType, one
// LayerMediaType layer. annotations go on the manifest, with
// org.opencontainers.image.created added unless given. It goes to ref's
// registry, never a mirror, and returns the manifest's descriptor.
func (c *Client) Push(ctx context.Context, wasm []byte, ref string, annotations map[string]string) (Descriptor, error) {
	if int64(len(wasm)) > c.max {
		return Descriptor{}, fmt.Errorf("the module is %d bytes, over the limit of %d", len(wasm), c.max)
	}
	r, err := c.ParseReference(ref)
	if err != nil {
		return Descriptor{}, err
	}
	ann := maps.Clone(annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	created := time.Now().UTC().Format(time.RFC3339)
	if _, ok := ann[AnnotationCreated]; !ok {
		ann[AnnotationCreated] = created
	}
	layer := static.NewLayer(wasm, LayerMediaType)
	ld, err := layer.Digest()
	if err != nil {
		return Descriptor{}, err
	}
	cfgBytes, err := json.Marshal(wasmConfig{Created: ann[AnnotationCreated], Architecture: "wasm", OS: "wasip1", LayerDigests: []string{ld.String()}})
	if err != nil {
		return Descriptor{}, err
	}
	cfg := static.NewLayer(cfgBytes, ConfigMediaType)
	cd, _ := cfg.Digest()
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Digest: cd, Size: int64(len(cfgBytes))},
		Layers: []v1.Descriptor{{MediaType: LayerMediaType, Digest: ld, Size: int64(len(wasm)),
			Annotations: titleOf(ann)}},
		Annotations: ann,
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return Descriptor{}, err
	}
	opts := c.RemoteOptions(ctx)
	for _, l := range []v1.Layer{layer, cfg} {
		if err := remote.WriteLayer(r.Context(), l, opts...); err != nil {
			return Descriptor{}, c.explain(r, err)
		}
	}
	if err := remote.Put(r, rawManifest{b: mb, mt: types.OCIManifestSchema1}, opts...); err != nil {
		return Descriptor{}, c.explain(r, err)
	}
	return Descriptor{Digest: digestOf(mb), MediaType: string(types.OCIManifestSchema1), Size: int64(len(mb))}, nil
}

// titleOf is the layer's annotations: its title, the module's file name,
// when the manifest has one.
func titleOf(ann map[string]string) map[string]string {
	if t, ok := ann[AnnotationTitle]; ok {
		return map[string]string{AnnotationTitle: t}
	}
	return nil
}
