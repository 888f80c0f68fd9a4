package pluginsource

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/sigverify"
)

// Sigstore is the Verifier over internal/sigverify: one sigverify.Verifier
// per distinct policy, sharing the registry client's options
// (credentials, per-host TLS), its mirrors and one cache of results.
type Sigstore struct {
	opts []sigverify.Option

	mu sync.Mutex
	// verifiers are by the policy as written (file names): a
	// sigverify.Verifier reads its files again at each verification, so
	// a key file replaced in place applies to the next one, and its
	// cached results are by the files' contents.
	verifiers map[string]*sigverify.Verifier
}

// NewSigstore returns a Verifier that reaches registries as oci does,
// looking for signatures where pulls look for modules: each mirror in
// order, then the registry; with opts after its own
// (WithBundleSignatures).
func NewSigstore(oci *OCI, opts ...sigverify.Option) *Sigstore {
	return &Sigstore{opts: append([]sigverify.Option{
		// The context here is only a placeholder: sigverify puts each
		// call's own after it, and that one governs the requests.
		sigverify.WithRemoteOptions(oci.Client.RemoteOptions(context.Background())...),
		sigverify.WithLocations(func(ref name.Digest) ([]name.Digest, error) { return locations(oci.Client, ref) }),
		// A lookup at one place is bounded like a pull from it
		// (plugins.fetchTimeout).
		sigverify.WithTimeout(oci.Client.Timeout()),
		sigverify.WithCache(sigverify.NewCache()),
	}, opts...), verifiers: map[string]*sigverify.Verifier{}}
}

// WithBundleSignatures makes a Sigstore look for signatures first where
// `informer-host bundle load` puts those a bundle carries in the source
// cache cacheDir, so `verify: required` works with no registry.
func WithBundleSignatures(cacheDir string) sigverify.Option {
	return sigverify.WithLocalLayout(ociartifact.Store{Dir: cacheDir}.SignatureDir())
}

// locations are the client's mirrors and registry for ref, by digest.
func locations(c *ociartifact.Client, ref name.Digest) ([]name.Digest, error) {
	refs, err := c.Locations(ref.String())
	if err != nil {
		return nil, err
	}
	ds := make([]name.Digest, 0, len(refs))
	for _, r := range refs {
		d, ok := r.(name.Digest)
		if !ok {
			return nil, fmt.Errorf("location %s of %s is not by digest", r, ref)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// Verify implements Verifier. A refusal (required, and no signature
// verifies) is a result with its reason, not an error: it is final for
// that digest. An error means the verifier could not decide (a policy
// file unreadable, ctx ended).
func (s *Sigstore) Verify(ctx context.Context, p config.Verify, repo, digest string) (VerifyResult, error) {
	key := fmt.Sprintf("%#v", p)
	s.mu.Lock()
	v := s.verifiers[key]
	if v == nil {
		pol := sigverify.Policy{Required: p.Required, Keys: p.Keys, TrustedRoot: p.TrustedRoot}
		for _, id := range p.Identities {
			pol.Identities = append(pol.Identities, sigverify.Identity{Issuer: id.Issuer, Subject: id.Subject})
		}
		var err error
		if v, err = sigverify.New(pol, s.opts...); err != nil {
			s.mu.Unlock()
			return VerifyResult{}, err
		}
		s.verifiers[key] = v
	}
	s.mu.Unlock()
	r, err := v.Verify(ctx, repo, digest)
	if err != nil && !errors.Is(err, sigverify.ErrRefused) {
		return VerifyResult{}, err
	}
	return VerifyResult{Verified: r.Verified, Signer: r.Signer, Reason: r.Reason}, nil
}
