package ociartifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the forms this package reads and writes.
const (
	// ConfigMediaType is the CNCF TAG Runtime Wasm artifact's config.
	ConfigMediaType = "application/vnd.wasm.config.v0+json"
	// LayerMediaType is the CNCF form's one layer: the module itself.
	LayerMediaType = "application/wasm"
	// WasmToOCILayerMediaType is wasm-to-oci's layer.
	WasmToOCILayerMediaType = "application/vnd.wasm.content.layer.v1+wasm"
	// ImageModuleFile is the file Istio's image form holds the module in.
	ImageModuleFile = "plugin.wasm"
)

// Annotations Push writes besides the caller's.
const (
	AnnotationABIVersion   = "io.informer-host.abi.version"
	AnnotationCapabilities = "io.informer-host.capabilities"
	AnnotationCreated      = "org.opencontainers.image.created"
	AnnotationTitle        = "org.opencontainers.image.title"
	AnnotationRefName      = "org.opencontainers.image.ref.name"
)

// Format is the form a module was published in.
type Format string

const (
	FormatCNCF      Format = "cncf-wasm"   // CNCF TAG Runtime Wasm artifact
	FormatWasmToOCI Format = "wasm-to-oci" // wasm-to-oci's layer media type
	FormatImage     Format = "image"       // Istio's single-layer image holding plugin.wasm
	// FormatWasmLayer is one application/wasm layer under any config but
	// the CNCF one: what `oras push ref plugin.wasm:application/wasm`
	// writes (config application/vnd.oci.empty.v1+json).
	FormatWasmLayer Format = "wasm-layer"
)

// Descriptor names one manifest in a registry.
type Descriptor struct {
	Digest    string `json:"digest"` // "sha256:<hex>"
	MediaType string `json:"mediaType,omitempty"`
	Size      int64  `json:"size,omitempty"`
}

// Artifact is one module pulled.
type Artifact struct {
	// Ref is the reference pulled; From is where it came from (a mirror's
	// reference, or Ref's registry).
	Ref, From string
	// ManifestDigest is the manifest's; IndexDigest the index's it was
	// chosen from, if any.
	ManifestDigest, IndexDigest string
	// ModuleDigest is the sha256 of Bytes, the module; LayerDigest the
	// layer's, the same but for FormatImage (the tar's).
	ModuleDigest, LayerDigest string
	Format                    Format
	Bytes                     []byte
	// Annotations are the manifest's.
	Annotations map[string]string
}

// Resolve returns the manifest ref names: a digest ref as it is, with no
// request; a tag by a HEAD request (a GET if the registry answers HEAD
// without a digest), at each mirror in order and then the registry.
func (c *Client) Resolve(ctx context.Context, ref string) (Descriptor, error) {
	r, err := c.ParseReference(ref)
	if err != nil {
		return Descriptor{}, err
	}
	if d, ok := r.(name.Digest); ok {
		return Descriptor{Digest: d.DigestStr()}, nil
	}
	var errs []error
	for _, ep := range c.endpoints(r) {
		d, err := c.resolveAt(ctx, ep.ref)
		if err == nil {
			return Descriptor{Digest: d.Digest.String(), MediaType: string(d.MediaType), Size: d.Size}, nil
		}
		errs = append(errs, c.explain(ep.ref, err))
		if ctx.Err() != nil {
			break
		}
	}
	return Descriptor{}, errors.Join(errs...)
}

// resolveAt is one attempt at one endpoint, bounded by the timeout.
func (c *Client) resolveAt(ctx context.Context, ref name.Reference) (*v1.Descriptor, error) {
	actx, cancel := c.attempt(ctx, ref.Context().RegistryStr())
	defer cancel()
	opts := c.RemoteOptions(actx)
	d, err := remote.Head(ref, opts...)
	if err != nil && actx.Err() == nil {
		var g *remote.Descriptor
		if g, err = remote.Get(ref, opts...); err == nil {
			d = &g.Descriptor
		}
	}
	return d, attemptErr(actx, err)
}

// Pull fetches the module ref names, from each mirror in order and then
// the registry, the first that serves a valid one: a mirror with a wrong
// digest or a stale tag missing falls through to the next.
func (c *Client) Pull(ctx context.Context, ref string) (*Artifact, error) {
	p, err := c.pull(ctx, ref, false)
	if err != nil {
		return nil, err
	}
	return p.art, nil
}

// pulled is an artifact with the blobs it came in, for a bundle.
type pulled struct {
	art       *Artifact
	manifest  []byte
	mediaType types.MediaType
	config    []byte // only when asked for
	configD   v1.Descriptor
	layer     []byte
	layerD    v1.Descriptor
}

func (c *Client) pull(ctx context.Context, ref string, withConfig bool) (*pulled, error) {
	r, err := c.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ep := range c.endpoints(r) {
		p, err := c.pullFrom(ctx, ep.ref, withConfig)
		if err == nil {
			p.art.Ref = strings.TrimPrefix(ref, "oci://")
			p.art.From = ep.ref.String()
			return p, nil
		}
		if ep.mirror {
			err = fmt.Errorf("mirror: %w", err)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// pullFrom is one attempt at one endpoint, bounded by the timeout.
func (c *Client) pullFrom(ctx context.Context, ref name.Reference, withConfig bool) (*pulled, error) {
	actx, cancel := c.attempt(ctx, ref.Context().RegistryStr())
	defer cancel()
	opts := c.RemoteOptions(actx)
	d, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, c.explain(ref, attemptErr(actx, err))
	}
	src := &remoteSource{repo: ref.Context(), opts: opts}
	p, err := extract(actx, src, d.Manifest, d.MediaType, c.max, withConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, attemptErr(actx, err))
	}
	return p, nil
}

// source is where extract reads an artifact's manifests and blobs: a
// registry or an image layout.
type source interface {
	manifest(ctx context.Context, d v1.Descriptor) ([]byte, error)
	blob(ctx context.Context, d v1.Descriptor) (io.ReadCloser, error)
}

type remoteSource struct {
	repo name.Repository
	opts []remote.Option
}

func (s *remoteSource) manifest(ctx context.Context, d v1.Descriptor) ([]byte, error) {
	g, err := remote.Get(s.repo.Digest(d.Digest.String()), s.opts...)
	if err != nil {
		return nil, err
	}
	return g.Manifest, nil
}

func (s *remoteSource) blob(ctx context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	l, err := remote.Layer(s.repo.Digest(d.Digest.String()), s.opts...)
	if err != nil {
		return nil, err
	}
	return l.Compressed()
}

// maxIndexManifests bounds the manifests of an index extract reads.
const maxIndexManifests = 16

// configMax bounds a config blob.
const configMax = 1 << 20

// extract reads the module of the manifest raw (of media type mt) from
// src.
func extract(ctx context.Context, src source, raw []byte, mt types.MediaType, max int64, withConfig bool) (*pulled, error) {
	top := digestOf(raw)
	if mt.IsIndex() {
		return extractIndex(ctx, src, raw, max, withConfig)
	}
	if !mt.IsImage() && mt != "" {
		return nil, &UnknownFormatError{Manifest: string(mt)}
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("the manifest %s is not JSON: %v", top, err)
	}
	if mt == "" {
		mt = m.MediaType
	}
	format, layer, err := classify(&m)
	if err != nil {
		return nil, err
	}
	limit := max
	if format == FormatImage {
		// The tar's headers and padding around plugin.wasm; gzip rarely
		// makes a module larger.
		limit = max + 1<<20
	}
	if layer.Size > limit {
		return nil, fmt.Errorf("the layer %s is %d bytes, over the limit of %d (plugins.maxModuleSize): refused before download",
			layer.Digest, layer.Size, max)
	}
	blob, err := readBlob(ctx, src, layer, limit)
	if err != nil {
		return nil, err
	}
	p := &pulled{manifest: raw, mediaType: mt, layer: blob, layerD: layer, configD: m.Config}
	a := &Artifact{ManifestDigest: top, LayerDigest: layer.Digest.String(), Format: format, Annotations: m.Annotations}
	a.Bytes = blob
	if format == FormatImage {
		if a.Bytes, err = untarModule(blob, layer.MediaType, max); err != nil {
			return nil, fmt.Errorf("the layer %s: %w", layer.Digest, err)
		}
	}
	a.ModuleDigest = digestOf(a.Bytes)
	p.art = a
	if withConfig {
		if m.Config.Size > configMax {
			return nil, fmt.Errorf("the config %s is %d bytes, over %d", m.Config.Digest, m.Config.Size, configMax)
		}
		if p.config, err = readBlob(ctx, src, m.Config, configMax); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// extractIndex reads the one module of the index raw. Which manifest
// that is, is decided from the manifests alone, each distinct digest
// read once, and only the chosen one's layer is downloaded: an index
// cannot make the client download more than one module, nor the same one
// many times. A Wasm artifact (the CNCF or wasm-to-oci form) is a module
// by its media types; an image only may be one (its layer holds
// plugin.wasm or not), so an image is read only when the index has no
// Wasm artifact and no other image.
func extractIndex(ctx context.Context, src source, raw []byte, max int64, withConfig bool) (*pulled, error) {
	top := digestOf(raw)
	var idx v1.IndexManifest
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("the index %s is not JSON: %v", top, err)
	}
	if len(idx.Manifests) > maxIndexManifests {
		return nil, fmt.Errorf("the index %s lists %d manifests, more than the %d read for a module: "+
			"push the module on its own (informer-host push) and name that", top, len(idx.Manifests), maxIndexManifests)
	}
	type candidate struct {
		d   v1.Descriptor
		raw []byte
	}
	var wasm, images []candidate
	var seen []string
	read := map[v1.Hash]bool{}
	complete := true
	for i, m := range idx.Manifests {
		if read[m.Digest] {
			continue
		}
		read[m.Digest] = true
		if !m.MediaType.IsImage() {
			seen = append(seen, fmt.Sprintf("%s (%s)", m.Digest, m.MediaType))
			continue
		}
		if m.Size > MaxManifestSize {
			return nil, fmt.Errorf("the index's manifest %s is %d bytes, over the %dMiB a manifest may be: refused unread", m.Digest, m.Size, MaxManifestSize>>20)
		}
		b, err := src.manifest(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("the index's manifest %s: %w", m.Digest, err)
		}
		if digestOf(b) != m.Digest.String() {
			return nil, fmt.Errorf("the index's manifest %s: content does not match its digest (got %s)", m.Digest, digestOf(b))
		}
		var mf v1.Manifest
		if err := json.Unmarshal(b, &mf); err != nil {
			return nil, fmt.Errorf("the index's manifest %s is not JSON: %v", m.Digest, err)
		}
		format, _, err := classify(&mf)
		if err != nil {
			var ue *UnknownFormatError
			if !errors.As(err, &ue) {
				return nil, err
			}
			seen = append(seen, fmt.Sprintf("%s (%s)", m.Digest, ue.summary()))
			continue
		}
		seen = append(seen, fmt.Sprintf("%s (%s)", m.Digest, format))
		if format == FormatImage {
			images = append(images, candidate{m, b})
			continue
		}
		wasm = append(wasm, candidate{m, b})
		if len(wasm) == 2 {
			complete = i == len(idx.Manifests)-1
			break // two already make the index ambiguous
		}
	}
	var chosen candidate
	switch {
	case len(wasm) == 1:
		chosen = wasm[0]
	case len(wasm) > 1:
		more := ""
		if !complete {
			more = ", or more (the rest were not read)"
		}
		return nil, fmt.Errorf("the index %s has %d Wasm module manifests%s, and a module source needs exactly one: %s; "+
			"name the one you mean by its digest (repo@sha256:...)", top, len(wasm), more, strings.Join(seen, ", "))
	case len(images) == 1:
		chosen = images[0]
	case len(images) > 1:
		return nil, fmt.Errorf("the index %s has no Wasm artifact and %d images, any of which may hold %s, and a module source needs exactly one: %s; "+
			"name the one you mean by its digest (repo@sha256:...)", top, len(images), ImageModuleFile, strings.Join(seen, ", "))
	default:
		return nil, fmt.Errorf("the index %s has 0 Wasm module manifests, and a module source needs exactly one: %s; "+
			"name the one you mean by its digest (repo@sha256:...)", top, strings.Join(seen, ", "))
	}
	p, err := extract(ctx, src, chosen.raw, chosen.d.MediaType, max, withConfig)
	if err != nil {
		if errors.Is(err, errNoModuleFile) {
			return nil, fmt.Errorf("the index %s has 0 Wasm module manifests, and a module source needs exactly one: %s (an image without %s)",
				top, chosen.d.Digest, ImageModuleFile)
		}
		return nil, err
	}
	p.art.IndexDigest = top
	return p, nil
}

// UnknownFormatError is a manifest in none of the forms this package
// reads.
type UnknownFormatError struct {
	Manifest, Config string
	Layers           []string
}

func (e *UnknownFormatError) summary() string {
	if e.Config == "" && e.Layers == nil {
		return "manifest " + e.Manifest
	}
	return fmt.Sprintf("config %s, layers [%s]", e.Config, strings.Join(e.Layers, ", "))
}

func (e *UnknownFormatError) Error() string {
	return fmt.Sprintf("not a Wasm module artifact: it has %s; this host reads one %s layer "+
		"(under config %s, as informer-host push writes, or any other, as oras push writes), wasm-to-oci's (one %s layer) "+
		"or an image of exactly one tar(+gzip) layer holding %s: republish the module with informer-host push",
		e.summary(), LayerMediaType, ConfigMediaType, WasmToOCILayerMediaType, ImageModuleFile)
}

// classify says which form m is and which layer holds the module.
func classify(m *v1.Manifest) (Format, v1.Descriptor, error) {
	layers := make([]string, len(m.Layers))
	for i, l := range m.Layers {
		layers[i] = string(l.MediaType)
	}
	unknown := &UnknownFormatError{Manifest: string(m.MediaType), Config: string(m.Config.MediaType), Layers: layers}
	if len(m.Layers) != 1 {
		return "", v1.Descriptor{}, unknown
	}
	l := m.Layers[0]
	switch {
	case l.MediaType == LayerMediaType && m.Config.MediaType == ConfigMediaType:
		return FormatCNCF, l, nil
	case l.MediaType == LayerMediaType:
		// The layer's type says it is the module, whatever the config
		// (which nothing here reads).
		return FormatWasmLayer, l, nil
	case l.MediaType == WasmToOCILayerMediaType:
		return FormatWasmToOCI, l, nil
	case slices.Contains(imageLayerTypes, l.MediaType) && (m.Config.MediaType == types.DockerConfigJSON || m.Config.MediaType == types.OCIConfigJSON):
		return FormatImage, l, nil
	}
	return "", v1.Descriptor{}, unknown
}

var imageLayerTypes = []types.MediaType{types.DockerLayer, types.OCILayer, types.OCIUncompressedLayer, types.DockerUncompressedLayer}

// readBlob reads d from src, at most limit bytes and no more than d
// says, and checks its digest.
func readBlob(ctx context.Context, src source, d v1.Descriptor, limit int64) ([]byte, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("the blob %s: only sha256 digests are read", d.Digest)
	}
	rc, err := src.blob(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("the blob %s: %w", d.Digest, err)
	}
	defer rc.Close()
	want := min(limit, d.Size)
	h := sha256.New()
	var buf bytes.Buffer
	n, err := io.Copy(io.MultiWriter(&buf, h), io.LimitReader(rc, want+1))
	if err != nil && !isVerifyError(err) {
		return nil, fmt.Errorf("the blob %s: %w", d.Digest, err)
	}
	if n > want {
		if want == limit && d.Size > limit {
			return nil, fmt.Errorf("the blob %s is over the limit of %d bytes", d.Digest, limit)
		}
		return nil, fmt.Errorf("the blob %s is larger than the %d bytes its descriptor says: the registry served something else", d.Digest, d.Size)
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != d.Digest.String() {
		return nil, fmt.Errorf("the blob %s: content does not match its digest (got %s, %d bytes): the registry or a proxy served something else", d.Digest, got, n)
	}
	return buf.Bytes(), nil
}

// isVerifyError is go-containerregistry's own digest or size check,
// which fails a read at EOF; readBlob reports that itself, with the
// digest it got.
func isVerifyError(err error) bool {
	return strings.Contains(err.Error(), "error verifying")
}

// errNoModuleFile is an image whose layer has no plugin.wasm: an image,
// but not a module's.
var errNoModuleFile = errors.New("no " + ImageModuleFile + " in the image's layer")

// untarModule returns plugin.wasm from a tar or tar+gzip layer, reading
// no more than a bounded amount of decompressed data.
func untarModule(blob []byte, mt types.MediaType, max int64) ([]byte, error) {
	var r io.Reader = bytes.NewReader(blob)
	if mt == types.DockerLayer || mt == types.OCILayer {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("not gzip, as its media type %s says: %v", mt, err)
		}
		r = gz
	}
	// Whatever else the tar holds is read past, not kept; bound it so
	// a layer that inflates without end stops.
	budget := &io.LimitedReader{R: r, N: 4*max + 1<<20}
	tr := tar.NewReader(budget)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if budget.N <= 0 {
				return nil, fmt.Errorf("the tar inflates past %d bytes without %s", 4*max+1<<20, ImageModuleFile)
			}
			return nil, fmt.Errorf("not a tar: %v", err)
		}
		if path.Base(h.Name) != ImageModuleFile || h.Typeflag != tar.TypeReg {
			if len(names) < 5 {
				names = append(names, h.Name)
			}
			continue
		}
		if h.Size > max {
			return nil, fmt.Errorf("%s is %d bytes, over the limit of %d (plugins.maxModuleSize)", h.Name, h.Size, max)
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil || int64(len(b)) != h.Size {
			return nil, fmt.Errorf("%s: truncated: %v", h.Name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w (it has %s): Istio's image form keeps the module as /%s",
		errNoModuleFile, strings.Join(cmpSlice(names, []string{"no files"}), ", "), ImageModuleFile)
}

func cmpSlice(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
