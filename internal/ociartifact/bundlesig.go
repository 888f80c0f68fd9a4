package ociartifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The signature forms a bundle carries, by media type (internal/sigverify
// reads them; this package only copies them, so it names the types
// rather than importing the verifier).
const (
	sigstoreBundlePrefix = "application/vnd.dev.sigstore.bundle"
	cosignSimpleSigning  = "application/vnd.dev.cosign.simplesigning.v1+json"
	// maxSignatures bounds the signature artifacts saved per module, and
	// maxSignatureBlob each of their blobs (sigverify reads no more).
	maxSignatures    = 16
	maxSignatureBlob = 1 << 20
	// maxReferrerCandidates bounds the referrers looked at per module.
	maxReferrerCandidates = 64
	emptyMediaType        = "application/vnd.oci.empty.v1+json"
)

// saveSignatures copies the signatures of digest in repo into lp: the
// referrers whose artifact type is a sigstore bundle (cosign v3, what
// informer-host sign writes) and cosign's legacy sha256-<hex>.sig tag,
// each manifest byte for byte with its blobs. It returns how many.
func (c *Client) saveSignatures(ctx context.Context, lp layout.Path, repo name.Repository, digest string) (int, error) {
	opts := c.RemoteOptions(ctx)
	idx, err := remote.Referrers(repo.Digest(digest), opts...)
	if err != nil {
		return 0, fmt.Errorf("listing the signatures (referrers) of %s: %w", digest, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return 0, fmt.Errorf("listing the signatures (referrers) of %s: %w", digest, err)
	}
	n, looked := 0, 0
	for _, d := range im.Manifests {
		// Some registries report the config's media type (empty) as
		// the artifact type; the manifest then tells.
		at := d.ArtifactType
		if at != "" && at != emptyMediaType && !strings.HasPrefix(at, sigstoreBundlePrefix) {
			continue // an SBOM, an attestation of another kind
		}
		if n >= maxSignatures || looked >= maxReferrerCandidates {
			break
		}
		looked++
		g, err := remote.Get(repo.Digest(d.Digest.String()), opts...)
		if err != nil {
			return n, fmt.Errorf("the signature %s of %s: %w", d.Digest, digest, err)
		}
		if !isSignature(g.Manifest) {
			continue
		}
		if err := copySignature(lp, repo, g, v1.Descriptor{ArtifactType: d.ArtifactType}, opts); err != nil {
			return n, fmt.Errorf("the signature %s of %s: %w", d.Digest, digest, err)
		}
		n++
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return n, err
	}
	tag := repo.Tag(h.Algorithm + "-" + h.Hex + ".sig")
	g, err := remote.Get(tag, opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == 404 {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("the signature tag %s: %w", tag, err)
	}
	full := tag.Name()
	if err := copySignature(lp, repo, g, v1.Descriptor{Annotations: map[string]string{AnnotationRefName: full}}, opts); err != nil {
		return n, fmt.Errorf("the signature tag %s: %w", tag, err)
	}
	return n + 1, nil
}

// copySignature writes g's manifest and blobs into lp and lists it in
// index.json with extra's artifact type and annotations.
func copySignature(lp layout.Path, repo name.Repository, g *remote.Descriptor, extra v1.Descriptor, opts []remote.Option) error {
	if len(g.Manifest) > manifestMax {
		return fmt.Errorf("the manifest is %d bytes, over %d", len(g.Manifest), manifestMax)
	}
	m, err := v1.ParseManifest(bytes.NewReader(g.Manifest))
	if err != nil {
		return fmt.Errorf("not an image manifest: %v", err)
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if b.Size > maxSignatureBlob {
			return fmt.Errorf("the blob %s is %d bytes, over the %d a signature may take", b.Digest, b.Size, maxSignatureBlob)
		}
		l, err := remote.Layer(repo.Digest(b.Digest.String()), opts...)
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxSignatureBlob+1))
		rc.Close()
		if err != nil {
			return err
		}
		if digestOf(data) != b.Digest.String() {
			return fmt.Errorf("the blob %s does not match its digest", b.Digest)
		}
		if err := lp.WriteBlob(b.Digest, io.NopCloser(bytes.NewReader(data))); err != nil {
			return err
		}
	}
	if err := lp.WriteBlob(g.Digest, io.NopCloser(bytes.NewReader(g.Manifest))); err != nil {
		return err
	}
	extra.MediaType, extra.Digest, extra.Size = g.MediaType, g.Digest, int64(len(g.Manifest))
	return lp.AppendDescriptor(extra)
}

// isSignature reports whether the manifest raw is a signature artifact
// (a sigstore bundle referrer, a cosign simple-signing or bundle .sig
// image) rather than a module.
func isSignature(raw []byte) bool {
	var m v1.Manifest
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	if strings.HasPrefix(m.ArtifactType, sigstoreBundlePrefix) || strings.HasPrefix(string(m.Config.MediaType), sigstoreBundlePrefix) {
		return true
	}
	for _, l := range m.Layers {
		if mt := string(l.MediaType); strings.HasPrefix(mt, sigstoreBundlePrefix) || mt == cosignSimpleSigning {
			return true
		}
	}
	return false
}

// putSignature copies the signature artifact d (manifest raw) from the
// bundle's layout src into the store's signature layout, replacing an
// entry of the same digest.
func (s Store) putSignature(src layout.Path, d v1.Descriptor, raw []byte) error {
	dst, err := layout.FromPath(s.SignatureDir())
	if err != nil {
		if dst, err = layout.Write(s.SignatureDir(), empty.Index); err != nil {
			return fmt.Errorf("signature store %s: %w", s.SignatureDir(), err)
		}
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not an image manifest: %v", err)
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if b.Size > maxSignatureBlob {
			return fmt.Errorf("the blob %s is %d bytes, over the %d a signature may take", b.Digest, b.Size, maxSignatureBlob)
		}
		rc, err := src.Blob(b.Digest)
		if err != nil {
			return fmt.Errorf("the bundle lacks its blob %s: save the bundle again", b.Digest)
		}
		err = dst.WriteBlob(b.Digest, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	if err := dst.WriteBlob(d.Digest, io.NopCloser(bytes.NewReader(raw))); err != nil {
		return err
	}
	if err := dst.RemoveDescriptors(match.Digests(d.Digest)); err != nil {
		return err
	}
	return dst.AppendDescriptor(d)
}
