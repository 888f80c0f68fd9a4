package ociartifact

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Saved is what SaveBundle saved of one reference.
type Saved struct {
	Ref string
	// Signatures is how many signature artifacts were saved with it.
	Signatures int
	// Skipped says which of its referrers and .sig tag were left out
	// and why, "" when none were.
	Skipped string
}

// annotationContainerdName is the full reference containerd's import
// reads, written beside org.opencontainers.image.ref.name so `ctr import`
// names the images too.
const annotationContainerdName = "io.containerd.image.name"

// SaveBundle pulls every ref (as Pull does: checked, within the size
// limit) and writes them to w as one OCI image layout in a tar, for a
// site with no registry: each ref's manifest, config and layer, byte for
// byte (the manifest digests stay those the registry served, so a
// signature over them still holds), with its signatures (the sigstore
// bundle referrers of the digest the ref names and cosign's legacy
// sha256-<hex>.sig tag, as saveSignatures copies them), listed in index.json with the full
// reference as org.opencontainers.image.ref.name. A ref to an index (by
// digest or by a tag naming one) is saved as that index, with the
// manifests it lists but only the chosen module's blobs, so the bundle
// still answers for the index digest.
//
// It returns, for each ref, how many signatures it saved and which
// referrers it skipped and why (saveSignatures).
func (c *Client) SaveBundle(ctx context.Context, refs []string, w io.Writer) ([]Saved, error) {
	if len(refs) == 0 {
		return nil, errors.New("bundle: no references to save")
	}
	dir, err := os.MkdirTemp("", "informer-host-bundle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var saved []Saved
	for _, ref := range refs {
		r, err := c.ParseReference(ref)
		if err != nil {
			return nil, err
		}
		p, err := c.pull(ctx, ref, true)
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		md, err := v1.NewHash(p.art.ManifestDigest)
		if err != nil {
			return nil, err
		}
		for _, b := range []struct {
			h    v1.Hash
			data []byte
		}{{p.configD.Digest, p.config}, {p.layerD.Digest, p.layer}, {md, p.manifest}} {
			if err := lp.WriteBlob(b.h, io.NopCloser(bytes.NewReader(b.data))); err != nil {
				return nil, fmt.Errorf("bundle: %w", err)
			}
		}
		top := v1.Descriptor{MediaType: p.mediaType, Digest: md, Size: int64(len(p.manifest))}
		if p.art.IndexDigest != "" {
			if top, err = c.saveIndex(ctx, lp, p); err != nil {
				return nil, fmt.Errorf("bundle: %s: %w", ref, err)
			}
		}
		full := r.Name()
		top.Annotations = map[string]string{AnnotationRefName: full, annotationContainerdName: full}
		if err := lp.AppendDescriptor(top); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		from, err := c.ParseReference(p.art.From)
		if err != nil {
			return nil, err
		}
		n, skipped, err := c.saveSignatures(ctx, lp, from.Context(), top.Digest.String())
		if err != nil {
			return nil, fmt.Errorf("bundle: %s: %w", ref, err)
		}
		saved = append(saved, Saved{Ref: ref, Signatures: n, Skipped: skipped})
	}
	if err := tarDir(dir, w); err != nil {
		return nil, err
	}
	return saved, nil
}

// saveIndex writes the index p was chosen from, and the manifests it
// lists (not their blobs: only the chosen one's module is saved), so
// that the bundle serves the index digest, which a source pinned to it,
// or a tag naming it, resolves to. It returns the index's descriptor.
func (c *Client) saveIndex(ctx context.Context, lp layout.Path, p *pulled) (v1.Descriptor, error) {
	from, err := c.ParseReference(p.art.From)
	if err != nil {
		return v1.Descriptor{}, err
	}
	opts := c.RemoteOptions(ctx)
	get := func(digest string) (*remote.Descriptor, error) {
		g, err := remote.Get(from.Context().Digest(digest), opts...)
		if err != nil {
			return nil, c.explain(from, err)
		}
		if got := digestOf(g.Manifest); got != digest {
			return nil, fmt.Errorf("the registry served %s for %s", got, digest)
		}
		if len(g.Manifest) > manifestMax {
			return nil, fmt.Errorf("the manifest %s is %d bytes, over %d", digest, len(g.Manifest), manifestMax)
		}
		return g, nil
	}
	idx, err := get(p.art.IndexDigest)
	if err != nil {
		return v1.Descriptor{}, err
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(idx.Manifest, &im); err != nil {
		return v1.Descriptor{}, fmt.Errorf("the index %s is not JSON: %v", p.art.IndexDigest, err)
	}
	for i, m := range im.Manifests {
		if i >= maxIndexManifests || !m.MediaType.IsImage() || m.Digest.String() == p.art.ManifestDigest {
			continue
		}
		g, err := get(m.Digest.String())
		if err != nil {
			return v1.Descriptor{}, err
		}
		if err := lp.WriteBlob(m.Digest, io.NopCloser(bytes.NewReader(g.Manifest))); err != nil {
			return v1.Descriptor{}, err
		}
	}
	if err := lp.WriteBlob(idx.Digest, io.NopCloser(bytes.NewReader(idx.Manifest))); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: idx.MediaType, Digest: idx.Digest, Size: int64(len(idx.Manifest))}, nil
}

// tarDir writes dir's files to w, in lexical order, with fixed times so
// the same content makes the same tar.
func tarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0).UTC()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch})
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return tw.Close()
}

// Loaded is one module LoadBundle put in the store.
type Loaded struct {
	// Ref is the reference the bundle names it by (its ref.name), "" if
	// none.
	Ref            string
	ManifestDigest string
	// IndexDigest is the index the manifest was chosen from, if the
	// bundle lists an index.
	IndexDigest  string
	ModuleDigest string
	Format       Format
	// Path is the module in the store.
	Path string
	// Signature is true for a signature artifact the bundle carried,
	// put in the store's SignatureDir (Path) rather than run.
	Signature bool
	// Recorded is whether Ref became the store's record of source
	// oci://Ref: a ref.name that is a full reference (registry/repository
	// with a tag or digest); a bare tag, as some tools write, names no
	// source.
	Recorded bool
}

// maxBundleFiles bounds the files a bundle may hold.
const maxBundleFiles = 4096

// LoadBundle reads an OCI image layout tar (SaveBundle's, or any tool's
// with the same forms) and puts every module it lists into store, each
// checked as Pull checks one (forms, digests, max bytes; zero is
// DefaultMaxModuleSize), and records each full ref.name as its source's
// last good digest, so a daemon configured with oci://<that ref> starts
// from it without a registry. The signature artifacts it lists (as
// SaveBundle saves them) go to store's SignatureDir, verified by nothing
// here: a verifier reads them there as it would from a registry.
// What it writes is bounded (extractLayout):
// only the blobs index.json references, no sparse file, at most
// max + 2 MiB per entry of index.json in all. r is read more than once.
func LoadBundle(ctx context.Context, r io.ReadSeeker, store Store, max int64) ([]Loaded, error) {
	if max <= 0 {
		max = DefaultMaxModuleSize
	}
	if store.Dir == "" {
		return nil, errors.New("bundle: no store directory")
	}
	if err := os.MkdirAll(store.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	dir, err := os.MkdirTemp(store.Dir, ".bundle-")
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := extractLayout(r, dir, max); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: not an OCI image layout (no index.json or oci-layout): %w", err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("bundle: index.json: %w", err)
	}
	if len(im.Manifests) == 0 {
		return nil, errors.New("bundle: index.json lists no manifests")
	}
	src := &layoutSource{lp: lp, max: max + 1<<20}
	var out []Loaded
	for _, d := range im.Manifests {
		ref := d.Annotations[AnnotationRefName]
		if ref == "" {
			ref = d.Annotations[annotationContainerdName]
		}
		what := d.Digest.String()
		if ref != "" {
			what = ref + " (" + what + ")"
		}
		raw, err := src.manifest(ctx, d)
		if err != nil {
			return out, fmt.Errorf("bundle: %s: %w", what, err)
		}
		if got := digestOf(raw); got != d.Digest.String() {
			return out, fmt.Errorf("bundle: %s: the manifest does not match its digest (got %s)", what, got)
		}
		if isSignature(raw) {
			if err := store.putSignature(lp, d, raw); err != nil {
				return out, fmt.Errorf("bundle: the signature %s: %w", what, err)
			}
			out = append(out, Loaded{Ref: ref, ManifestDigest: d.Digest.String(), Signature: true, Path: store.SignatureDir()})
			continue
		}
		p, err := extract(ctx, src, raw, d.MediaType, max, false)
		if err != nil {
			return out, fmt.Errorf("bundle: %s: %w", what, err)
		}
		digest, file, err := store.Put(p.art.Bytes)
		if err != nil {
			return out, err
		}
		l := Loaded{Ref: ref, ManifestDigest: p.art.ManifestDigest, IndexDigest: p.art.IndexDigest, ModuleDigest: digest, Format: p.art.Format, Path: file}
		if fullRef(ref) {
			// The record holds the digest the source resolves to, the
			// index's for an index, as the daemon's own records do.
			err := store.SaveRecord(Record{Source: "oci://" + ref, ModuleDigest: digest, ManifestDigest: cmpOr(p.art.IndexDigest, p.art.ManifestDigest),
				Format: p.art.Format, Annotations: p.art.Annotations})
			if err != nil {
				return out, err
			}
			l.Recorded = true
		}
		out = append(out, l)
	}
	return out, nil
}

// fullRef reports whether ref names a registry and repository, not a
// bare tag.
func fullRef(ref string) bool {
	return strings.Contains(ref, "/") && (strings.Contains(ref, ":") || strings.Contains(ref, "@"))
}

type layoutSource struct {
	lp  layout.Path
	max int64
}

func (s *layoutSource) manifest(_ context.Context, d v1.Descriptor) ([]byte, error) {
	if d.Size > manifestMax {
		return nil, fmt.Errorf("the manifest %s is %d bytes, too large for a module's", d.Digest, d.Size)
	}
	return s.lp.Bytes(d.Digest)
}

func (s *layoutSource) blob(_ context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	return s.lp.Blob(d.Digest)
}

// Bounds of what a bundle may make LoadBundle write: a layout's own
// files, a manifest or index, and, over the whole bundle, the module
// size limit plus perEntrySlack for each entry of index.json (a module's
// manifest, config and image tar headers; an index and its other
// manifests; a signature's small blobs).
const (
	maxLayoutFile = 4 << 20
	manifestMax   = configMax * 4
	perEntrySlack = 2 << 20
)

// extractLayout writes the OCI image layout the tar r holds into dir,
// only what its index.json references: index.json, oci-layout and the
// blobs reachable from index.json's descriptors (through indexes and
// manifests), each written once, checked against its descriptor's size
// and digest; other files are skipped. It refuses a sparse entry (a few
// bytes in the tar that read back as a file of any size), anything but
// regular files and directories, a name outside dir, more than
// maxBundleFiles entries, and a referenced blob over its limit or past
// the total bound: len(index.json's manifests) × (max + perEntrySlack).
// With no sparse entry and each blob written once, it never writes more
// than the tar holds.
// r is read once per level of references (at most maxLayoutDepth).
func extractLayout(r io.ReadSeeker, dir string, max int64) error {
	top := map[string][]byte{"index.json": nil, "oci-layout": nil}
	files := 0
	err := eachEntry(r, func(h *tar.Header, clean string, tr *tar.Reader) error {
		if h.Typeflag == tar.TypeDir {
			return nil
		}
		if files++; files > maxBundleFiles {
			return fmt.Errorf("more than %d files: a bundle holds an OCI image layout of modules and their signatures; save fewer modules per bundle", maxBundleFiles)
		}
		if _, ok := top[clean]; ok {
			if h.Size > maxLayoutFile {
				return fmt.Errorf("%s is %d bytes, over the %d a layout's %s may take", h.Name, h.Size, maxLayoutFile, clean)
			}
			b, err := io.ReadAll(io.LimitReader(tr, maxLayoutFile))
			if err != nil {
				return err
			}
			top[clean] = b
		}
		return nil
	})
	if err != nil {
		return err
	}
	if top["index.json"] == nil {
		return errors.New("not an OCI image layout: the tar has no index.json (make bundles with informer-host bundle save, or any tool writing an OCI image layout)")
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(top["index.json"], &index); err != nil {
		return fmt.Errorf("index.json is not an OCI image index: %v", err)
	}
	if len(index.Manifests) > maxBundleFiles {
		return fmt.Errorf("index.json lists %d manifests, more than %d", len(index.Manifests), maxBundleFiles)
	}
	bound := int64(len(index.Manifests)) * (max + perEntrySlack)
	var written int64
	want := map[string]v1.Descriptor{} // by hex, to write in the next pass
	done := map[string]bool{}
	wantManifests := func(ds []v1.Descriptor) {
		for _, d := range ds {
			if d.Digest.Algorithm == "sha256" && !done[d.Digest.Hex] {
				if d.MediaType == "" {
					d.MediaType = types.OCIManifestSchema1 // index.json's entries are manifests
				}
				want[d.Digest.Hex] = d
			}
		}
	}
	wantManifests(index.Manifests)
	for depth := 0; len(want) > 0 && depth < maxLayoutDepth; depth++ {
		pass := want
		want = map[string]v1.Descriptor{}
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return err
		}
		err := eachEntry(r, func(h *tar.Header, clean string, tr *tar.Reader) error {
			hexName, ok := strings.CutPrefix(clean, "blobs/sha256/")
			d, wanted := pass[hexName]
			if !ok || !wanted || done[hexName] {
				return nil // not referenced: skipped
			}
			isManifest := d.MediaType.IsIndex() || d.MediaType.IsImage()
			limit := max + 1<<20
			if isManifest {
				limit = manifestMax
			}
			switch {
			case h.Size != d.Size:
				return fmt.Errorf("%s is %d bytes, but the descriptor referencing it says %d", h.Name, h.Size, d.Size)
			case h.Size > limit:
				return fmt.Errorf("%s is %d bytes, over the limit of %d", h.Name, h.Size, limit)
			case written+h.Size > bound:
				return fmt.Errorf("%s would take the bytes written past the bound of %d (%d per module listed in index.json: the module size limit %d plus %d): "+
					"a bundle's modules are each within the module size limit; save oversized content elsewhere", h.Name, bound, max+perEntrySlack, max, perEntrySlack)
			}
			b, err := writeBlob(filepath.Join(dir, filepath.FromSlash(clean)), tr, d, isManifest)
			if err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			written += h.Size
			done[hexName] = true
			if isManifest {
				var m struct {
					Manifests []v1.Descriptor `json:"manifests"`
					Config    *v1.Descriptor  `json:"config"`
					Layers    []v1.Descriptor `json:"layers"`
				}
				if json.Unmarshal(b, &m) == nil {
					wantManifests(m.Manifests)
					for _, l := range append(m.Layers, derefDesc(m.Config)...) {
						if l.Digest.Algorithm == "sha256" && !done[l.Digest.Hex] {
							l.MediaType = "" // read as a blob, whatever it claims
							want[l.Digest.Hex] = l
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for name, b := range top {
		if b != nil {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxLayoutDepth is how deep references are followed: index.json, an
// index, its manifests, their blobs.
const maxLayoutDepth = 4

func derefDesc(d *v1.Descriptor) []v1.Descriptor {
	if d == nil {
		return nil
	}
	return []v1.Descriptor{*d}
}

// writeBlob writes d's blob from r to target, checking its digest, and
// returns its bytes when keep (a manifest, small).
func writeBlob(target string, r io.Reader, d v1.Descriptor, keep bool) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	var kept bytes.Buffer
	w := io.MultiWriter(f, h)
	if keep {
		w = io.MultiWriter(f, h, &kept)
	}
	_, err = io.Copy(w, io.LimitReader(r, d.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Digest.Hex {
		os.Remove(target)
		return nil, fmt.Errorf("content is sha256:%s, not its name: the bundle is damaged; save it again", got)
	}
	return kept.Bytes(), nil
}

// eachEntry calls f for each entry of the tar r, after refusing what no
// layout holds: a name outside it, a sparse file, a link or device.
func eachEntry(r io.Reader, f func(h *tar.Header, clean string, tr *tar.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a tar: %v", err)
		}
		clean := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if clean == "." {
			continue
		}
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("the tar names %q, outside the layout", h.Name)
		}
		if sparse(h) {
			return fmt.Errorf("%s is a sparse file, which reads back as %d bytes from far fewer in the tar: "+
				"a bundle's files are whole; write the tar without sparse files (informer-host bundle save does; GNU tar without --sparse)", h.Name, h.Size)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			return fmt.Errorf("%s is not a regular file or directory (tar type %q): a bundle holds an OCI image layout's files only", h.Name, h.Typeflag)
		}
		if err := f(h, clean, tr); err != nil {
			return err
		}
	}
}

// sparse reports a GNU sparse entry, old (type S) or PAX (GNU.sparse.*
// records, which archive/tar expands without saying so otherwise).
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return strings.Contains(h.Name, "GNUSparseFile.")
}
