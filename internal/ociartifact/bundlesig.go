package ociartifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The signature forms a bundle carries, by media type and annotation
// (internal/sigverify reads them; this package only copies them, so it
// names them rather than importing the verifier).
const (
	sigstoreBundlePrefix = "application/vnd.dev.sigstore.bundle"
	cosignSimpleSigning  = "application/vnd.dev.cosign.simplesigning.v1+json"
	emptyMediaType       = "application/vnd.oci.empty.v1+json"
	// PredicateAnnotation is where cosign repeats, on the referrer, the
	// predicate type of the statement a bundle holds; SignPredicate is a
	// signature's, any other an attestation's.
	PredicateAnnotation = "dev.sigstore.bundle.predicateType"
	SignPredicate       = "https://sigstore.dev/cosign/sign/v1"

	// MaxTypedReferrers and MaxUntypedReferrers bound the referrers of
	// one digest looked at as signatures, each kind on its own, by
	// SaveBundle and internal/sigverify alike (SortSignatureReferrers):
	// every signature among them is saved, so a bundle holds whatever a
	// lookup at the registry would look at, and junk pushed ahead of a
	// good signature hides it from a bundle no sooner than from the
	// registry itself. The bounds are well above what one digest
	// gathers in practice (a signature per signer and release), so that
	// junk pushed by anyone with push access does not hide a good
	// signature cheaply.
	MaxTypedReferrers   = 128
	MaxUntypedReferrers = 128
	// maxSignatureBlob bounds each blob of a signature (sigverify reads
	// no more), and perEntrySlack (LoadBundle's allowance per entry of
	// index.json) all its blobs together, so that what is saved loads.
	// maxLegacyLayers bounds the layers of the .sig tag (sigverify reads
	// no more; cosign adds one per signing), maxReferrerLayers a
	// referrer's (cosign writes one), so that junk saved cannot take a
	// bundle past LoadBundle's file count alone: a module's signatures
	// take at most 256 × 6 + 66 files.
	maxSignatureBlob  = 1 << 20
	maxLegacyLayers   = 64
	maxReferrerLayers = 4
	// maxSkipReasons bounds the failures a save describes one by one.
	maxSkipReasons = 3
)

// SignatureReferrers are the referrers of a digest sorted for a
// signature lookup, as SaveBundle and internal/sigverify both look at
// them, and what was passed over unfetched.
type SignatureReferrers struct {
	// Candidates are worth fetching, in order: those listed with a
	// sigstore bundle artifact type, then those with no artifact type or
	// the empty config's (registries that report the config media type
	// list cosign's signatures so). The second kind is ambiguous, so it
	// comes after the first, each under its own bound, so that junk of
	// one kind cannot use up the other's share.
	Candidates []v1.Descriptor
	// OverTyped and OverUntyped count the candidates of each kind past
	// its bound, not looked at.
	OverTyped, OverUntyped int
	// Other counts the referrers of other artifact types, by type, and
	// Attestations the bundles of another predicate than a signature's:
	// neither is ever a signature, nor fetched.
	Other        map[string]int
	Attestations int
}

// SortSignatureReferrers sorts ds (a referrers list) for a signature
// lookup.
func SortSignatureReferrers(ds []v1.Descriptor) SignatureReferrers {
	r := SignatureReferrers{Other: map[string]int{}}
	var typed, untyped []v1.Descriptor
	for _, d := range ds {
		// cosign writes the predicate type of what a bundle holds as an
		// annotation the referrers list repeats: an attestation (SBOM,
		// provenance) is never a signature, and a repository gathers
		// many, so it is not fetched.
		if pt := d.Annotations[PredicateAnnotation]; pt != "" && pt != SignPredicate {
			r.Attestations++
			continue
		}
		switch at := d.ArtifactType; {
		case strings.HasPrefix(at, sigstoreBundlePrefix):
			typed = append(typed, d)
		case at == "" || at == emptyMediaType:
			untyped = append(untyped, d)
		default:
			r.Other[at]++
		}
	}
	if len(typed) > MaxTypedReferrers {
		r.OverTyped, typed = len(typed)-MaxTypedReferrers, typed[:MaxTypedReferrers]
	}
	if len(untyped) > MaxUntypedReferrers {
		r.OverUntyped, untyped = len(untyped)-MaxUntypedReferrers, untyped[:MaxUntypedReferrers]
	}
	r.Candidates = append(typed, untyped...)
	return r
}

// skipped tallies what saveSignatures left out, for its report.
type skipped struct {
	other, attestations, notSignature, overBound int
	failed                                       []string
}

func (s skipped) String() string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(s.other, "of other artifact types")
	add(s.attestations, "attestations")
	add(s.notSignature, "untyped that are not signatures")
	add(s.overBound, fmt.Sprintf("past the first %d bundle-typed or %d untyped", MaxTypedReferrers, MaxUntypedReferrers))
	if len(s.failed) > 0 {
		why := s.failed
		if len(why) > maxSkipReasons {
			why = append(why[:maxSkipReasons:maxSkipReasons], fmt.Sprintf("and %d more", len(s.failed)-maxSkipReasons))
		}
		parts = append(parts, fmt.Sprintf("%d that could not be copied (%s)", len(s.failed), strings.Join(why, "; ")))
	}
	return strings.Join(parts, ", ")
}

// saveSignatures copies the signatures of digest in repo into lp: the
// referrers that are sigstore bundles (cosign v3, what informer-host
// sign writes), typed ones first, as SortSignatureReferrers orders and
// the bounds above limit them, and cosign's legacy sha256-<hex>.sig
// tag, each manifest byte for byte with its blobs. Anyone who can push
// to repo can push referrers, so one that cannot be copied (gone, not a
// signature, oversize, not matching its digest) is skipped, not fatal:
// it returns how many were saved and what was skipped and why. Only a
// referrers list that cannot be read, or ctx ending, is an error.
func (c *Client) saveSignatures(ctx context.Context, lp layout.Path, repo name.Repository, digest string) (int, string, error) {
	opts := c.RemoteOptions(ctx)
	idx, err := remote.Referrers(repo.Digest(digest), opts...)
	if err != nil {
		return 0, "", fmt.Errorf("listing the signatures (referrers) of %s: %w", digest, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return 0, "", fmt.Errorf("listing the signatures (referrers) of %s: %w", digest, err)
	}
	refs := SortSignatureReferrers(im.Manifests)
	other := 0
	for _, k := range refs.Other {
		other += k
	}
	skip := skipped{other: other, attestations: refs.Attestations, overBound: refs.OverTyped + refs.OverUntyped}
	n := 0
	for _, d := range refs.Candidates {
		// Some registries report the config's media type (empty) as the
		// artifact type; the manifest then tells.
		f, err := fetchSignature(repo, repo.Digest(d.Digest.String()), maxReferrerLayers, opts)
		switch {
		case ctx.Err() != nil:
			return n, "", fmt.Errorf("the signature %s of %s: %w", d.Digest, digest, ctx.Err())
		case errors.Is(err, errNotSignature):
			skip.notSignature++
			continue
		case err != nil:
			skip.failed = append(skip.failed, fmt.Sprintf("%s: %s", d.Digest, oneLine(err)))
			continue
		}
		if err := f.write(lp, v1.Descriptor{ArtifactType: d.ArtifactType}); err != nil {
			return n, "", fmt.Errorf("the signature %s of %s: %w", d.Digest, digest, err)
		}
		n++
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return n, "", err
	}
	tag := repo.Tag(h.Algorithm + "-" + h.Hex + ".sig")
	f, err := fetchSignature(repo, tag, maxLegacyLayers, opts)
	var terr *transport.Error
	switch {
	case ctx.Err() != nil:
		return n, "", fmt.Errorf("the signature tag %s: %w", tag, ctx.Err())
	case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
	case err != nil:
		skip.failed = append(skip.failed, fmt.Sprintf("the tag %s: %s", tag.TagStr(), oneLine(err)))
	default:
		if err := f.write(lp, v1.Descriptor{Annotations: map[string]string{AnnotationRefName: tag.Name()}}); err != nil {
			return n, "", fmt.Errorf("the signature tag %s: %w", tag, err)
		}
		n++
	}
	return n, skip.String(), nil
}

// oneLine is err's message on one line: a registry's error body may
// hold line breaks.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// errNotSignature is a manifest that is no signature artifact.
var errNotSignature = errors.New("not a signature")

// fetched is a signature artifact read whole from a registry, checked,
// not yet written.
type fetched struct {
	g     *remote.Descriptor
	blobs []v1.Descriptor
	data  [][]byte
}

// fetchSignature reads the signature artifact ref names with its blobs
// and checks each against its descriptor and the bounds above, so that
// one that fails leaves nothing in the bundle.
func fetchSignature(repo name.Repository, ref name.Reference, maxLayers int, opts []remote.Option) (*fetched, error) {
	g, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	if len(g.Manifest) > manifestMax {
		return nil, fmt.Errorf("the manifest is %d bytes, over %d", len(g.Manifest), manifestMax)
	}
	if dg, ok := ref.(name.Digest); ok && g.Digest.String() != dg.DigestStr() {
		return nil, fmt.Errorf("the registry served %s", g.Digest)
	}
	if !isSignature(g.Manifest) {
		return nil, errNotSignature
	}
	m, err := v1.ParseManifest(bytes.NewReader(g.Manifest))
	if err != nil {
		return nil, fmt.Errorf("not an image manifest: %v", err)
	}
	if len(m.Layers) > maxLayers {
		return nil, fmt.Errorf("%d layers, over the %d a signature here may have", len(m.Layers), maxLayers)
	}
	f := &fetched{g: g, blobs: append([]v1.Descriptor{m.Config}, m.Layers...)}
	total := int64(len(g.Manifest))
	for _, b := range f.blobs {
		if b.Size > maxSignatureBlob || b.Size < 0 {
			return nil, fmt.Errorf("the blob %s is %d bytes, over the %d a signature may take", b.Digest, b.Size, maxSignatureBlob)
		}
		if total += b.Size; total > perEntrySlack {
			return nil, fmt.Errorf("its blobs take over the %d bytes a signature may take in a bundle", perEntrySlack)
		}
	}
	for _, b := range f.blobs {
		l, err := remote.Layer(repo.Digest(b.Digest.String()), opts...)
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, fmt.Errorf("the blob %s: %w", b.Digest, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, b.Size+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("the blob %s: %w", b.Digest, err)
		}
		if digestOf(data) != b.Digest.String() {
			return nil, fmt.Errorf("the blob %s does not match its digest", b.Digest)
		}
		f.data = append(f.data, data)
	}
	return f, nil
}

// write puts f's manifest and blobs into lp and lists it in index.json
// with extra's artifact type and annotations.
func (f *fetched) write(lp layout.Path, extra v1.Descriptor) error {
	for i, b := range f.blobs {
		if err := lp.WriteBlob(b.Digest, io.NopCloser(bytes.NewReader(f.data[i]))); err != nil {
			return err
		}
	}
	if err := lp.WriteBlob(f.g.Digest, io.NopCloser(bytes.NewReader(f.g.Manifest))); err != nil {
		return err
	}
	extra.MediaType, extra.Digest, extra.Size = f.g.MediaType, f.g.Digest, int64(len(f.g.Manifest))
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
