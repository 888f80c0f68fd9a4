package pluginsource

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/sigverify"
)

// Sigstore is the Verifier over internal/sigverify: one sigverify.Verifier
// per distinct policy, sharing the registry client's options
// (credentials, per-host TLS) and one cache of results.
type Sigstore struct {
	opts []sigverify.Option

	mu        sync.Mutex
	verifiers map[string]*sigverify.Verifier // by policy
}

// NewSigstore returns a Verifier that reaches registries as oci does,
// with opts after its own (WithBundleSignatures).
func NewSigstore(oci *OCI, opts ...sigverify.Option) *Sigstore {
	return &Sigstore{opts: append([]sigverify.Option{sigverify.WithRemoteOptions(oci.Client.RemoteOptions(context.Background())...),
		sigverify.WithCache(sigverify.NewCache())}, opts...), verifiers: map[string]*sigverify.Verifier{}}
}

// WithBundleSignatures makes a Sigstore look for signatures first where
// `informer-host bundle load` puts those a bundle carries in the source
// cache cacheDir, so `verify: required` works with no registry.
func WithBundleSignatures(cacheDir string) sigverify.Option {
	return sigverify.WithLocalLayout(ociartifact.Store{Dir: cacheDir}.SignatureDir())
}

// Verify implements Verifier. A refusal (required, and no signature
// verifies) is a result with its reason, not an error: it is final for
// that digest. An error means the verifier could not decide (a policy
// file unreadable, the registry not answering).
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
