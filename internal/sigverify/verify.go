package sigverify

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// Media and predicate types this package reads and writes.
const (
	// BundleMediaType is cosign v3's referrer artifactType and the media
	// type of its one layer, the sigstore bundle JSON.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SignPredicateType is the in-toto predicate type of a cosign v3
	// image signature; a DSSE statement of another type is an
	// attestation and does not count as a signature.
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
	// SimpleSigningMediaType is the layer of cosign's legacy
	// sha256-<hex>.sig tag.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

	bundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	emptyMediaType        = "application/vnd.oci.empty.v1+json"
	signatureAnnotation   = "dev.cosignproject.cosign/signature"
	certificateAnnotation = "dev.sigstore.cosign/certificate"
	rekorBundleAnnotation = "dev.sigstore.cosign/bundle"

	// maxReferrers bounds how many referrers of one digest are looked
	// at, and maxBlobBytes how large a bundle or payload may be: a
	// registry cannot make verification read without end.
	maxReferrers = 64
	maxBlobBytes = 1 << 20
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
	remote   []remote.Option
	cache    *Cache
	password []byte
	now      func() time.Time
	local    string // WithLocalLayout, local.go
}

// WithRemoteOptions passes go-containerregistry options (authentication,
// transport, user agent) to every registry call.
func WithRemoteOptions(o ...remote.Option) Option {
	return func(op *options) { op.remote = append(op.remote, o...) }
}

// WithCache makes the Verifier keep its verified results in c (shared by
// the Verifiers of several policies, persisted when c came from
// OpenCache). Without it each Verifier has its own in-memory cache.
func WithCache(c *Cache) Option { return func(op *options) { op.cache = c } }

// WithKeyPassword decrypts an encrypted private key (cosign's
// "ENCRYPTED SIGSTORE PRIVATE KEY", or PKCS#8) for SignWithKey.
func WithKeyPassword(pw []byte) Option { return func(op *options) { op.password = pw } }

func makeOptions(opts []Option) options {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Verifier verifies artifacts against one Policy.
type Verifier struct {
	policy *compiled
	cache  *Cache
	remote []remote.Option
	now    func() time.Time
	local  string
}

// New loads p (key files, trusted root) from disk; nothing goes to the
// network. Its errors name the file or entry and what is wrong with it.
func New(p Policy, opts ...Option) (*Verifier, error) {
	c, err := compile(p)
	if err != nil {
		return nil, err
	}
	o := makeOptions(opts)
	if o.cache == nil {
		o.cache = NewCache()
	}
	return &Verifier{policy: c, cache: o.cache, remote: o.remote, now: o.now, local: o.local}, nil
}

// Verify looks for signatures of the manifest digest (sha256:<hex>) in
// repo (registry/path, an oci:// prefix allowed) and verifies them
// against the policy. When the policy requires a signature and none
// verifies, the error wraps ErrRefused and says why; otherwise the error
// is nil and Result says what was found. A digest verified before under
// the same policy is answered from the cache without the registry.
func (v *Verifier) Verify(ctx context.Context, repo, digest string) (Result, error) {
	ref, hash, err := parseRef(repo, digest)
	if err != nil {
		return Result{Reason: err.Error()}, err
	}
	if e, ok := v.cache.get(hash.String(), v.policy.fingerprint); ok {
		return Result{Verified: true, Signer: e.Signer, Reason: e.Reason + " (cached " + e.VerifiedAt.UTC().Format(time.RFC3339) + ")", Cached: true}, nil
	}
	var res Result
	if len(v.policy.keys) == 0 && len(v.policy.identities) == 0 {
		res = Result{Reason: "signatures not checked: the policy names no key and no identity"}
	} else {
		res, err = v.verifyLocalThenRemote(ctx, ref, hash)
		if err != nil {
			res = Result{Reason: fmt.Sprintf("could not look for signatures of %s: %v", ref, err)}
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

func (v *Verifier) verifyRemote(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, error) {
	ropts := append([]remote.Option{remote.WithContext(ctx)}, v.remote...)
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
	looked := 0
	for _, desc := range im.Manifests {
		at := desc.ArtifactType
		if at != "" && at != emptyMediaType && !strings.HasPrefix(at, bundleMediaTypePrefix) {
			continue // an SBOM, an attestation of another kind: not ours
		}
		if looked++; looked > maxReferrers {
			tried = append(tried, found{"referrers", fmt.Sprintf("more than %d candidate referrers; the rest were not looked at", maxReferrers)})
			break
		}
		where := "referrer " + desc.Digest.String()
		raw, err := v.bundleFromReferrer(ref.Context().Digest(desc.Digest.String()), ropts)
		if err != nil {
			tried = append(tried, found{where, err.Error()})
			continue
		}
		if raw == nil {
			continue // a referrer of another kind, reported as empty config
		}
		signer, why := v.checkBundle(raw, digestBytes, hash)
		if signer != "" {
			return Result{Verified: true, Signer: signer, Reason: "signature verified: sigstore bundle in " + where}, nil
		}
		tried = append(tried, found{where, why})
	}

	// (2) cosign's legacy tag.
	signer, legacy, err := v.checkLegacy(ctx, ref, hash, digestBytes, ropts)
	if err != nil {
		// what the referrers showed still stands; the tag's trouble is
		// one more thing found
		legacy = append(legacy, found{"tag " + legacyTag(hash), err.Error()})
	}
	if signer != "" {
		return Result{Verified: true, Signer: signer, Reason: legacy[0].why}, nil
	}
	tried = append(tried, legacy...)

	if len(tried) == 0 {
		return Result{Reason: fmt.Sprintf("unsigned: no sigstore bundle among the referrers of %s and no tag %s in %s", hash, legacyTag(hash), ref.Context())}, nil
	}
	parts := make([]string, 0, len(tried))
	for _, f := range tried {
		parts = append(parts, f.where+": "+f.why)
	}
	return Result{Reason: fmt.Sprintf("no verified signature (%d looked at): %s", len(tried), strings.Join(parts, "; "))}, nil
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
