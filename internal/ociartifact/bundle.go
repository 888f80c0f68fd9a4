package ociartifact

import (
	"archive/tar"
	"bytes"
	"context"
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
)

// annotationContainerdName is the full reference containerd's import
// reads, written beside org.opencontainers.image.ref.name so `ctr import`
// names the images too.
const annotationContainerdName = "io.containerd.image.name"

// SaveBundle pulls every ref (as Pull does: checked, within the size
// limit) and writes them to w as one OCI image layout in a tar, for a
// site with no registry: each ref's manifest, config and layer, byte for
// byte (the manifest digests stay those the registry served, so a
// signature over them still holds), listed in index.json with the full
// reference as org.opencontainers.image.ref.name. A ref to an index is
// saved as the one module manifest Pull chooses from it.
func (c *Client) SaveBundle(ctx context.Context, refs []string, w io.Writer) error {
	if len(refs) == 0 {
		return errors.New("bundle: no references to save")
	}
	dir, err := os.MkdirTemp("", "informer-host-bundle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	for _, ref := range refs {
		r, err := c.ParseReference(ref)
		if err != nil {
			return err
		}
		p, err := c.pull(ctx, ref, true)
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		md, err := v1.NewHash(p.art.ManifestDigest)
		if err != nil {
			return err
		}
		for _, b := range []struct {
			h    v1.Hash
			data []byte
		}{{p.configD.Digest, p.config}, {p.layerD.Digest, p.layer}, {md, p.manifest}} {
			if err := lp.WriteBlob(b.h, io.NopCloser(bytes.NewReader(b.data))); err != nil {
				return fmt.Errorf("bundle: %w", err)
			}
		}
		full := r.Name()
		if err := lp.AppendDescriptor(v1.Descriptor{
			MediaType:   p.mediaType,
			Digest:      md,
			Size:        int64(len(p.manifest)),
			Annotations: map[string]string{AnnotationRefName: full, annotationContainerdName: full},
		}); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	return tarDir(dir, w)
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
	ModuleDigest   string
	Format         Format
	// Path is the module in the store.
	Path string
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
// from it without a registry.
func LoadBundle(ctx context.Context, r io.Reader, store Store, max int64) ([]Loaded, error) {
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
	if err := untarDir(r, dir, max+1<<20); err != nil {
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
		p, err := extract(ctx, src, raw, d.MediaType, max, false)
		if err != nil {
			return out, fmt.Errorf("bundle: %s: %w", what, err)
		}
		digest, file, err := store.Put(p.art.Bytes)
		if err != nil {
			return out, err
		}
		l := Loaded{Ref: ref, ManifestDigest: p.art.ManifestDigest, ModuleDigest: digest, Format: p.art.Format, Path: file}
		if fullRef(ref) {
			err := store.SaveRecord(Record{Source: "oci://" + ref, ModuleDigest: digest, ManifestDigest: p.art.ManifestDigest,
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
	if d.Size > configMax*4 {
		return nil, fmt.Errorf("the manifest %s is %d bytes, too large for a module's", d.Digest, d.Size)
	}
	return s.lp.Bytes(d.Digest)
}

func (s *layoutSource) blob(_ context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	return s.lp.Blob(d.Digest)
}

// untarDir extracts r into dir: regular files and directories only,
// each file at most max bytes, no name outside dir.
func untarDir(r io.Reader, dir string, max int64) error {
	tr := tar.NewReader(r)
	files := 0
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
		target := filepath.Join(dir, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			files++
			if files > maxBundleFiles {
				return fmt.Errorf("more than %d files", maxBundleFiles)
			}
			if h.Size > max {
				return fmt.Errorf("%s is %d bytes, over the limit of %d", h.Name, h.Size, max)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is not a regular file or directory (tar type %q)", h.Name, h.Typeflag)
		}
	}
}
