package sigverify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/informer-host/informer-host/internal/ociartifact"
)

// Media and predicate types this package reads and writes.
const (
	// BundleMediaType is cosign v3's referrer artifactType and the media
	// type of its one layer, the sigstore bundle JSON.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SignPredicateType is the in-toto predicate type of a cosign v3
	// image signature; a DSSE statement of another type is an
	// attestation and does not count as a signature.
	SignPredicateType = ociartifact.SignPredicate
	// SimpleSigningMediaType is the layer of cosign's legacy
	// sha256-<hex>.sig tag.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

	bundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	emptyMediaType        = "application/vnd.oci.empty.v1+json"
	signatureAnnotation   = "dev.cosignproject.cosign/signature"
	certificateAnnotation = "dev.sigstore.cosign/certificate"
	rekorBundleAnnotation = "dev.sigstore.cosign/bundle"

	predicateAnnotation = ociartifact.PredicateAnnotation

	// maxBlobBytes bounds how large a bundle or payload may be: a
	// registry cannot make verification read without end. How many
	// referrers are looked at is ociartifact's MaxTypedReferrers and
	// MaxUntypedReferrers, shared with `bundle save`; each costs two
	// small requests, and the per-location timeout bounds them all.
	maxBlobBytes = 1 << 20

	// DefaultTimeout bounds one location's signature lookup (referrers,
	// their manifests and bundles, the legacy tag) when WithTimeout does
	// not say otherwise.
	DefaultTimeout = 30 * time.Second
)

// ErrRefused is wrapped by the error Verify returns when the policy
// requires a signature and the artifact has no verified one.
var ErrRefused = errors.New("signature required")

// Result is what Verify found for one digest.
type Result struct {
	// Verified is true when a signature naming the digest verified
	// against the policy.
	Verified bool
	// Signer is who signed it: "key FILE (sha256:FINGERPRINT)" or the
	// certificate's "SUBJECT (issuer ISSUER)". Empty when not verified.
	Signer string
	// Reason says what was found: where the verified signature was, or
	// why there is none (unsigned, wrong identity, wrong key, digest
	// mismatch, untrusted CA, expired certificate, no trusted timestamp,
	// the registry not answering...).
	Reason string
	// Cached is true when the result came from the cache, without the
	// registry.
	Cached bool
}

// Option configures New and SignWithKey.
type Option func(*options)

type options struct {
	remote    []remote.Option
	cache     *Cache
	password  []byte
	now       func() time.Time
	timeout   time.Duration
	locations func(name.Digest) ([]name.Digest, error)
	local     string // WithLocalLayout, local.go
}

// WithRemoteOptions passes go-containerregistry options (authentication,
// transport, user agent) to every registry call. A remote.WithContext
// among them is overridden: the context of the call (Verify,
// SignWithKey, AttachBundle) governs every request it makes.
func WithRemoteOptions(o ...remote.Option) Option {
	return func(op *options) { op.remote = append(op.remote, o...) }
}

// WithTimeout bounds the signature lookup at one location (DefaultTimeout
// without it, at most the caller's context): a registry that accepts a
// request and never answers is a failure that names the stall, not a
// verification that never ends. Zero or less is DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(op *options) {
		if d > 0 {
			op.timeout = d
		}
	}
}

// WithLocations tells Verify where the artifact is pulled from: for the
// digest reference it is given, the references to look for signatures
// at, in order (a registry's mirrors, then the registry itself, as the
// pulls try them). A signature verified at any of them counts, since it
// names the digest. Without it, signatures are looked up in the
// repository Verify is given only.
func WithLocations(f func(ref name.Digest) ([]name.Digest, error)) Option {
	return func(op *options) { op.locations = f }
}

// WithCache makes the Verifier keep its verified results in c (shared by
// the Verifiers of several policies, persisted when c came from
// OpenCache). Without it each Verifier has its own in-memory cache.
func WithCache(c *Cache) Option { return func(op *options) { op.cache = c } }

// WithKeyPassword decrypts an encrypted private key (cosign's
// "ENCRYPTED SIGSTORE PRIVATE KEY", or PKCS#8) for SignWithKey.
func WithKeyPassword(pw []byte) Option { return func(op *options) { op.password = pw } }

func makeOptions(opts []Option) options {
	o := options{now: time.Now, timeout: DefaultTimeout}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Verifier verifies artifacts against one Policy.
type Verifier struct {
	// policy is the policy one verification uses: Verify takes a copy
	// of the Verifier with the files as they are now.
	policy    *compiled
	files     *policySource
	cache     *Cache
	remote    []remote.Option
	now       func() time.Time
	timeout   time.Duration
	locations func(name.Digest) ([]name.Digest, error)
	local     string // WithLocalLayout, local.go
}

// policySource is a Policy with its files as last read and compiled. The
// files are read again at every verification, so that an operator who
// replaces a leaked key's file revokes it at the next one, without a
// restart; they are compiled again only when their contents changed.
type policySource struct {
	p Policy

	mu  sync.Mutex
	sum [sha256.Size]byte
	c   *compiled
}

func (s *policySource) load() (*compiled, error) {
	files, err := readPolicyFiles(s.p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil && s.sum == files.sum {
		return s.c, nil
	}
	c, err := compile(s.p, files)
	if err != nil {
		return nil, err
	}
	s.sum, s.c = files.sum, c
	return c, nil
}

// New loads p (key files, trusted root) from disk; nothing goes to the
// network. Its errors name the file or entry and what is wrong with it.
// The files are read again at each Verify: a replaced key or trusted
// root applies to the next verification.
func New(p Policy, opts ...Option) (*Verifier, error) {
	src := &policySource{p: p}
	c, err := src.load()
	if err != nil {
		return nil, err
	}
	o := makeOptions(opts)
	if o.cache == nil {
		o.cache = NewCache()
	}
	return &Verifier{policy: c, files: src, cache: o.cache, remote: o.remote, now: o.now, timeout: o.timeout, locations: o.locations, local: o.local}, nil
}

// Verify looks for signatures of the manifest digest (sha256:<hex>) in
// repo (registry/path, an oci:// prefix allowed) and verifies them
// against the policy. When the policy requires a signature and none
// verifies, the error wraps ErrRefused and says why; otherwise the error
// is nil and Result says what was found. A digest verified before under
// the same policy (the same keys, identities and trusted root, by
// content) is answered from the cache without the registry. A policy
// file that cannot be read or parsed now is an error naming it, and so
// is ctx ending: neither wraps ErrRefused, they decide nothing.
func (v *Verifier) Verify(ctx context.Context, repo, digest string) (Result, error) {
	ref, hash, err := parseRef(repo, digest)
	if err != nil {
		return Result{Reason: err.Error()}, err
	}
	c, err := v.files.load()
	if err != nil {
		return Result{Reason: err.Error()}, err
	}
	now := *v
	now.policy = c
	return now.verify(ctx, ref, hash)
}

func (v *Verifier) verify(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, error) {
	var err error
	if e, ok := v.cache.get(hash.String(), v.policy.fingerprint); ok {
		return Result{Verified: true, Signer: e.Signer, Reason: e.Reason + " (cached " + e.VerifiedAt.UTC().Format(time.RFC3339) + ")", Cached: true}, nil
	}
	var res Result
	if len(v.policy.keys) == 0 && len(v.policy.identities) == 0 {
		res = Result{Reason: "signatures not checked: the policy names no key and no identity"}
	} else {
		if res, err = v.verifyLocalThenRemote(ctx, ref, hash); err != nil {
			return res, err
		}
	}
	if res.Verified {
		if err := v.cache.put(cacheEntry{Digest: hash.String(), Policy: v.policy.fingerprint, Signer: res.Signer, Reason: res.Reason, VerifiedAt: v.now()}); err != nil {
			res.Reason += fmt.Sprintf(" (not cached: %v)", err)
		}
		return res, nil
	}
	if v.policy.required {
		return res, fmt.Errorf("%w: %s: %s", ErrRefused, ref, res.Reason)
	}
	return res, nil
}

// parseRef accepts repo as registry/path (oci:// allowed) and digest as
// sha256:<64 hex>.
func parseRef(repo, digest string) (name.Digest, v1.Hash, error) {
	repo = strings.TrimPrefix(repo, "oci://")
	hash, err := v1.NewHash(digest)
	if err != nil || hash.Algorithm != "sha256" {
		return name.Digest{}, v1.Hash{}, fmt.Errorf("digest %q: want sha256:<64 hex digits>, the manifest digest the artifact is pulled by", digest)
	}
	ref, err := name.NewDigest(repo + "@" + hash.String())
	if err != nil {
		return name.Digest{}, v1.Hash{}, fmt.Errorf("repository %q: %v: want registry/path, for example ghcr.io/org/plugins/name", repo, err)
	}
	return ref, hash, nil
}

// found is one signature looked at, where it was and what became of it.
type found struct {
	where string
	why   string
}

// verifyRemote looks for a verified signature of hash at each location of
// ref in turn. Its error is only ctx ending; a location that fails or
// stalls is one more reason in the result.
func (v *Verifier) verifyRemote(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, error) {
	locs := []name.Digest{ref}
	if v.locations != nil {
		l, err := v.locations(ref)
		if err != nil {
			return Result{Reason: fmt.Sprintf("could not tell where to look for signatures of %s: %v", ref, err)}, nil
		}
		if len(l) > 0 {
			locs = l
		}
	}
	reasons := make([]string, 0, len(locs))
	for _, loc := range locs {
		res, err := v.verifyAt(ctx, loc, hash)
		if ctx.Err() != nil {
			return Result{Reason: fmt.Sprintf("looking for signatures of %s stopped: %v", ref, context.Cause(ctx))},
				fmt.Errorf("looking for signatures of %s at %s stopped: %w", ref, loc.Context(), context.Cause(ctx))
		}
		if err != nil {
			res.Reason = fmt.Sprintf("could not look for signatures of %s: %v", loc, err)
		}
		if res.Verified {
			if loc.Context() != ref.Context() {
				res.Reason += " at " + loc.Context().String()
			}
			return res, nil
		}
		reasons = append(reasons, res.Reason)
	}
	if len(reasons) == 1 {
		return Result{Reason: reasons[0]}, nil
	}
	return Result{Reason: fmt.Sprintf("no verified signature at any of the %d places %s is pulled from: %s", len(locs), ref, strings.Join(reasons, "; "))}, nil
}

// candidates are a digest's referrers as ociartifact sorts them for a
// signature lookup (the order and bounds `bundle save` uses too), with
// what fetching them found.
type candidates struct {
	ociartifact.SignatureReferrers
	// notBundle counts candidates fetched whose manifest turned out not
	// to be a sigstore bundle artifact.
	notBundle int
}

// summary says what was skipped and why, for a reason: "referrers
// skipped: 70 of other artifact types (application/spdx+json: 70), not
// signatures; ...".
func (c candidates) summary() string {
	var parts []string
	other, kinds := 0, []string{}
	for k, n := range c.Other {
		other += n
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(kinds)
	if other > 0 {
		if len(kinds) > 4 {
			kinds = append(kinds[:4], "...")
		}
		parts = append(parts, fmt.Sprintf("%d of other artifact types (%s), not signatures", other, strings.Join(kinds, ", ")))
	}
	if c.Attestations > 0 {
		parts = append(parts, fmt.Sprintf("%d attestations, by their predicate type annotation", c.Attestations))
	}
	if c.notBundle > 0 {
		parts = append(parts, fmt.Sprintf("%d untyped whose manifest is not a sigstore bundle artifact", c.notBundle))
	}
	if c.OverTyped > 0 {
		parts = append(parts, fmt.Sprintf("%d bundle-typed referrers past the first %d", c.OverTyped, ociartifact.MaxTypedReferrers))
	}
	if c.OverUntyped > 0 {
		parts = append(parts, fmt.Sprintf("%d untyped referrers past the first %d", c.OverUntyped, ociartifact.MaxUntypedReferrers))
	}
	if len(parts) == 0 {
		return ""
	}
	return "referrers skipped: " + strings.Join(parts, "; ")
}

// maxReasons bounds how many signatures a refusal describes one by one.
const maxReasons = 8

// verifyAt looks for signatures of hash at one location, within the
// Verifier's timeout: its error says the registry could not be asked (or
// did not answer in time); a result says what was found.
func (v *Verifier) verifyAt(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, error) {
	actx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	res, err := v.lookAt(actx, ref, hash)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("registry %s did not answer within %s, the bound of a signature lookup: %w", ref.RegistryStr(), v.timeout, err)
	}
	return res, err
}

func (v *Verifier) lookAt(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, error) {
	// The call's context last: go-containerregistry keeps the last
	// WithContext, and one in the caller's options (the daemon's carry
	// context.Background()) must not outlive a stop or a reload.
	ropts := append(append([]remote.Option{}, v.remote...), remote.WithContext(ctx))
	digestBytes, err := hex.DecodeString(hash.Hex)
	if err != nil {
		return Result{}, err
	}
	var tried []found

	// (1) referrers, with ggcr's own fallback to the sha256-<hex> tag.
	idx, err := remote.Referrers(ref, ropts...)
	if err != nil {
		return Result{}, fmt.Errorf("listing referrers: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return Result{}, fmt.Errorf("listing referrers: %w", err)
	}
	cands := candidates{SignatureReferrers: ociartifact.SortSignatureReferrers(im.Manifests)}
	for _, desc := range cands.Candidates {
		where := "referrer " + desc.Digest.String()
		raw, err := v.bundleFromReferrer(ref.Context().Digest(desc.Digest.String()), ropts)
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("%s: %w", where, err)
			}
			tried = append(tried, found{where, err.Error()})
			continue
		}
		if raw == nil {
			cands.notBundle++
			continue
		}
		signer, why := v.checkBundle(raw, digestBytes, hash)
		if signer != "" {
			return Result{Verified: true, Signer: signer, Reason: "signature verified: sigstore bundle in " + where}, nil
		}
		tried = append(tried, found{where, why})
	}
	skipped := cands.summary()

	// (2) cosign's legacy tag.
	signer, legacy, err := v.checkLegacy(ctx, ref, hash, digestBytes, ropts)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, err
		}
		// what the referrers showed still stands; the tag's trouble is
		// one more thing found
		legacy = append(legacy, found{"tag " + legacyTag(hash), err.Error()})
	}
	if signer != "" {
		return Result{Verified: true, Signer: signer, Reason: legacy[0].why}, nil
	}
	tried = append(tried, legacy...)

	if len(tried) == 0 {
		r := fmt.Sprintf("unsigned: no sigstore bundle among the referrers of %s and no tag %s in %s", hash, legacyTag(hash), ref.Context())
		if skipped != "" {
			r += " (" + skipped + ")"
		}
		return Result{Reason: r}, nil
	}
	parts := make([]string, 0, maxReasons+2)
	for i, f := range tried {
		if i == maxReasons {
			parts = append(parts, fmt.Sprintf("and %d more", len(tried)-maxReasons))
			break
		}
		parts = append(parts, f.where+": "+f.why)
	}
	if skipped != "" {
		parts = append(parts, skipped)
	}
	return Result{Reason: fmt.Sprintf("no verified signature in %s (%d looked at): %s", ref.Context(), len(tried), strings.Join(parts, "; "))}, nil
}

// bundleFromReferrer returns the bundle JSON a referrer manifest holds,
// nil when the manifest is not a sigstore bundle artifact.
func (v *Verifier) bundleFromReferrer(ref name.Digest, ropts []remote.Option) ([]byte, error) {
	desc, err := remote.Get(ref, ropts...)
	if err != nil {
		return nil, fmt.Errorf("fetching the referrer manifest: %w", err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("referrer manifest: %w", err)
	}
	isBundle := strings.HasPrefix(m.ArtifactType, bundleMediaTypePrefix) || strings.HasPrefix(string(m.Config.MediaType), bundleMediaTypePrefix)
	if !isBundle {
		return nil, nil
	}
	for _, l := range m.Layers {
		if strings.HasPrefix(string(l.MediaType), bundleMediaTypePrefix) {
			return readBlob(ref.Context().Digest(l.Digest.String()), l.Size, ropts)
		}
	}
	return nil, errors.New("sigstore bundle artifact without a bundle layer")
}

func readBlob(ref name.Digest, size int64, ropts []remote.Option) ([]byte, error) {
	if size > maxBlobBytes {
		return nil, fmt.Errorf("blob %s is %d bytes, over the %d a signature may take", ref.DigestStr(), size, maxBlobBytes)
	}
	l, err := remote.Layer(ref, ropts...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s: %w", ref.DigestStr(), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxBlobBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s: %w", ref.DigestStr(), err)
	}
	if len(b) > maxBlobBytes {
		return nil, fmt.Errorf("blob %s is over the %d bytes a signature may take", ref.DigestStr(), maxBlobBytes)
	}
	return b, nil
}

// checkBundle verifies one sigstore bundle for digest; it returns the
// signer, or "" and why not.
func (v *Verifier) checkBundle(raw, digest []byte, hash v1.Hash) (signer, why string) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return "", fmt.Sprintf("not a valid sigstore bundle: %v", err)
	}
	if why := boundTo(&b, digest, hash); why != "" {
		return "", why
	}
	return v.checkEntity(&b, func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha256", digest) })
}

// boundTo says why b does not sign the manifest digest, or "".
func boundTo(b *bundle.Bundle, digest []byte, hash v1.Hash) string {
	sc, err := b.SignatureContent()
	if err != nil {
		return fmt.Sprintf("bundle content: %v", err)
	}
	if env := sc.EnvelopeContent(); env != nil {
		st, err := env.Statement()
		if err != nil {
			return fmt.Sprintf("the DSSE envelope does not hold an in-toto statement (%v)", err)
		}
		if st.GetPredicateType() != SignPredicateType {
			return fmt.Sprintf("not a signature: an attestation of predicate type %q, not %q", st.GetPredicateType(), SignPredicateType)
		}
		var subjects []string
		for _, s := range st.GetSubject() {
			d := s.GetDigest()["sha256"]
			if strings.EqualFold(d, hash.Hex) {
				return ""
			}
			subjects = append(subjects, "sha256:"+d)
		}
		return fmt.Sprintf("digest mismatch: the statement signs %s, not %s", strings.Join(subjects, ", "), hash)
	}
	ms := sc.MessageSignatureContent()
	if ms == nil {
		return "bundle holds neither a DSSE envelope nor a message signature"
	}
	if ms.DigestAlgorithm() != "SHA2_256" || !bytes.Equal(ms.Digest(), digest) {
		return fmt.Sprintf("digest mismatch: the message signature signs %s:%x, not %s", ms.DigestAlgorithm(), ms.Digest(), hash)
	}
	return ""
}

// checkEntity runs sigstore-go's verifier over e with the policy's keys
// or identities, whichever the entity's verification material calls for.
// artifact is a func because an artifact reader is used up by one
// verification and each key is one.
func (v *Verifier) checkEntity(e verify.SignedEntity, artifact func() verify.ArtifactPolicyOption) (signer, why string) {
	vc, err := e.VerificationContent()
	if err != nil {
		return "", fmt.Sprintf("verification material: %v", err)
	}
	if cert := vc.Certificate(); cert != nil {
		return v.checkKeyless(e, artifact)
	}
	if vc.PublicKey() == nil {
		return "", "bundle has neither a certificate nor a public key"
	}
	if len(v.policy.keys) == 0 {
		return "", "wrong key: signed with a key, but the policy names no keys (only identities)"
	}
	var last error
	for _, k := range v.policy.keys {
		ek := root.NewExpiringKey(k.verifier, time.Time{}, time.Time{})
		tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return ek, nil })
		ver, err := verify.NewVerifier(tm, verify.WithNoObserverTimestamps())
		if err != nil {
			return "", err.Error()
		}
		if _, err := ver.Verify(e, verify.NewPolicy(artifact(), verify.WithKey())); err != nil {
			last = err
			continue
		}
		return k.signer(), ""
	}
	files := make([]string, 0, len(v.policy.keys))
	for _, k := range v.policy.keys {
		files = append(files, k.file)
	}
	return "", fmt.Sprintf("wrong key: the signature verifies with none of the policy's keys (%s): %v", strings.Join(files, ", "), last)
}

func (v *Verifier) checkKeyless(e verify.SignedEntity, artifact func() verify.ArtifactPolicyOption) (signer, why string) {
	vc, _ := e.VerificationContent()
	cert := vc.Certificate()
	summary, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return "", fmt.Sprintf("certificate: %v", err)
	}
	who := fmt.Sprintf("%s (issuer %s)", summary.SubjectAlternativeName, summary.Issuer)
	if len(v.policy.identities) == 0 {
		return "", fmt.Sprintf("wrong identity: keyless signature by %s, but the policy names no identities (only keys)", who)
	}
	ver, err := verify.NewVerifier(v.policy.trusted, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
	if err != nil {
		return "", err.Error()
	}
	popts := make([]verify.PolicyOption, 0, len(v.policy.identities))
	for _, id := range v.policy.identities {
		popts = append(popts, verify.WithCertificateIdentity(id))
	}
	if _, err := ver.Verify(e, verify.NewPolicy(artifact(), popts...)); err != nil {
		if strings.Contains(err.Error(), "failed to verify leaf certificate") {
			// sigstore-go does not say whether the chain or the time
			// failed: a chain that verifies inside the certificate's
			// own validity means the CA is trusted and the time is not.
			if _, cerr := verify.VerifyLeafCertificate(cert.NotBefore, cert, v.policy.trusted); cerr == nil {
				return "", fmt.Sprintf("expired certificate: the certificate of %s (valid %s to %s) was not valid at the trusted signing time (%v)",
					who, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), err)
			}
		}
		return "", classify(err, who, v.policy.idNames)
	}
	return who, ""
}

// classify turns sigstore-go's error into the reason a person reads: the
// kind first, sigstore-go's words after.
func classify(err error, who string, accepted []string) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "failed to verify certificate identity"):
		return fmt.Sprintf("wrong identity: signed by %s; the policy accepts %s", who, strings.Join(accepted, ", "))
	case strings.Contains(s, "outside certificate validity"), strings.Contains(s, "expired or is not yet valid"):
		return fmt.Sprintf("expired certificate: the certificate of %s was not valid at the trusted signing time (%v)", who, err)
	case strings.Contains(s, "failed to verify log inclusion"):
		return fmt.Sprintf("transparency log: no entry verified against the trusted root's logs (%v)", err)
	case strings.Contains(s, "failed to verify timestamps"):
		return fmt.Sprintf("no trusted timestamp: a short-lived certificate needs its signing time from a transparency log's signed entry timestamp or a timestamp authority of the trusted root (%v)", err)
	case strings.Contains(s, "unknown authority"), strings.Contains(s, "failed to verify leaf certificate"):
		return fmt.Sprintf("untrusted CA: the certificate of %s does not chain to a certificate authority of the trusted root (%v)", who, err)
	case strings.Contains(s, "failed to verify signature"):
		return fmt.Sprintf("bad signature: %v", err)
	}
	return err.Error()
}

func legacyTag(hash v1.Hash) string { return hash.Algorithm + "-" + hash.Hex + ".sig" }

// isNotFound reports a registry's 404 (tag or manifest unknown).
func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == 404
}
