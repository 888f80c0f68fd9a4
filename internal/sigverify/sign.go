package sigverify

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
)

// SignWithKey signs the manifest digest in repo with a PEM private key,
// offline (no Fulcio, no Rekor, no timestamp authority), and attaches
// the signature as cosign v3 does: a sigstore bundle holding a DSSE
// envelope with an in-toto statement of predicate type
// SignPredicateType whose subject is the digest, pushed as a referrer
// artifact of type BundleMediaType. It returns the referrer manifest's
// digest. The key may be PKCS#8, EC or PKCS#1 PEM, or cosign's encrypted
// format with WithKeyPassword.
func SignWithKey(ctx context.Context, repo, digest string, privateKeyPEM []byte, opts ...Option) (string, error) {
	o := makeOptions(opts)
	ref, hash, err := parseRef(repo, digest)
	if err != nil {
		return "", err
	}
	var pf cryptoutils.PassFunc
	if o.password != nil {
		pf = cryptoutils.StaticPasswordFunc(o.password)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(privateKeyPEM, pf)
	if err != nil {
		return "", fmt.Errorf("private key: %v: give a PEM private key (cosign.key with its password, or an unencrypted PKCS#8/EC/RSA key)", err)
	}
	kp, err := newKeyPair(priv)
	if err != nil {
		return "", err
	}
	stmt, err := signStatement(ref, hash)
	if err != nil {
		return "", err
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: bundle.IntotoMediaType}, kp, sign.BundleOptions{Context: ctx})
	if err != nil {
		return "", fmt.Errorf("signing %s: %w", ref, err)
	}
	raw, err := protojson.Marshal(pb)
	if err != nil {
		return "", err
	}
	return AttachBundle(ctx, repo, digest, raw, opts...)
}

// signStatement is the in-toto statement cosign v3 signs for an image:
// the repository and digest as subject, cosign's simple-signing claims
// as predicate.
func signStatement(ref name.Digest, hash v1.Hash) ([]byte, error) {
	type claims struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				DockerManifestDigest string `json:"docker-manifest-digest"`
			} `json:"image"`
			Type string `json:"type"`
		} `json:"critical"`
		Optional map[string]any `json:"optional"`
	}
	var c claims
	c.Critical.Identity.DockerReference = ref.Context().Name()
	c.Critical.Image.DockerManifestDigest = hash.String()
	c.Critical.Type = "cosign container image signature"
	c.Optional = map[string]any{}
	return json.Marshal(map[string]any{
		"_type": "https://in-toto.io/Statement/v1",
		"subject": []map[string]any{{
			"name":   ref.Context().Name(),
			"digest": map[string]string{"sha256": hash.Hex},
		}},
		"predicateType": SignPredicateType,
		"predicate":     c,
	})
}

// AttachBundle pushes a sigstore bundle (JSON) as a referrer of the
// manifest digest in repo, in cosign v3's layout: an OCI manifest of
// artifactType BundleMediaType, the empty config, one layer holding the
// bundle, the digest as subject. Registries without the referrers API
// get the sha256-<hex> referrers tag updated instead (go-containerregistry
// does that). It returns the referrer manifest's digest.
func AttachBundle(ctx context.Context, repo, digest string, bundleJSON []byte, opts ...Option) (string, error) {
	o := makeOptions(opts)
	ref, _, err := parseRef(repo, digest)
	if err != nil {
		return "", err
	}
	// ctx last, so that it wins over one among the caller's options:
	// a registry that never answers is given up on with ctx.
	ropts := append(append([]remote.Option{}, o.remote...), remote.WithContext(ctx))
	subject, err := remote.Head(ref, ropts...)
	if err != nil {
		return "", fmt.Errorf("the manifest to sign, %s: %w", ref, err)
	}
	content := "message-signature"
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return "", fmt.Errorf("not a valid sigstore bundle: %w", err)
	}
	if b.GetDsseEnvelope() != nil {
		content = "dsse-envelope"
	}

	config := static.NewLayer([]byte("{}"), emptyMediaType)
	layer := static.NewLayer(bundleJSON, BundleMediaType)
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(ref.Context(), l, ropts...); err != nil {
			return "", fmt.Errorf("pushing the signature to %s: %w", ref.Context(), err)
		}
	}
	cd, err := config.Digest()
	if err != nil {
		return "", err
	}
	ld, err := layer.Digest()
	if err != nil {
		return "", err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  BundleMediaType,
		Config:        v1.Descriptor{MediaType: emptyMediaType, Digest: cd, Size: 2},
		Layers:        []v1.Descriptor{{MediaType: BundleMediaType, Digest: ld, Size: int64(len(bundleJSON))}},
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{
			"dev.sigstore.bundle.content":      content,
			"org.opencontainers.image.created": time.Now().UTC().Format(time.RFC3339),
		},
	}
	if content == "dsse-envelope" {
		m.Annotations["dev.sigstore.bundle.predicateType"] = SignPredicateType
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	md, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	if err := remote.Put(ref.Context().Digest(md.String()), rawManifest{raw, types.OCIManifestSchema1}, ropts...); err != nil {
		return "", fmt.Errorf("pushing the signature manifest to %s: %w", ref.Context(), err)
	}
	return md.String(), nil
}

type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// keyPair is sign.Keypair over a private key the caller has, where
// sigstore-go's own EphemeralKeypair generates one.
type keyPair struct {
	priv crypto.Signer
	alg  signature.AlgorithmDetails
	hint []byte
}

func newKeyPair(priv crypto.PrivateKey) (*keyPair, error) {
	s, ok := priv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", priv)
	}
	alg, err := signature.GetDefaultAlgorithmDetails(s.Public())
	if err != nil {
		return nil, fmt.Errorf("private key: %v: use an ECDSA, RSA or Ed25519 key", err)
	}
	der, err := x509.MarshalPKIXPublicKey(s.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &keyPair{priv: s, alg: alg, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

func (k *keyPair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.alg.GetProtoHashType() }
func (k *keyPair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.alg.GetSignatureAlgorithm()
}
func (k *keyPair) GetHint() []byte                { return k.hint }
func (k *keyPair) GetPublicKey() crypto.PublicKey { return k.priv.Public() }
func (k *keyPair) GetKeyAlgorithm() string {
	switch k.alg.GetKeyType() {
	case signature.ECDSA:
		return "ECDSA"
	case signature.RSA:
		return "RSA"
	case signature.ED25519:
		return "ED25519"
	}
	return ""
}

func (k *keyPair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.priv.Public())
	return string(b), err
}

// SignData signs data as sigstore-go's EphemeralKeypair does: a digest
// for RSA and ECDSA, the data itself for pure Ed25519.
func (k *keyPair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	hf := k.alg.GetHashType()
	toSign := data
	if hf != crypto.Hash(0) {
		h := hf.New()
		h.Write(data)
		toSign = h.Sum(nil)
	}
	sig, err := k.priv.Sign(rand.Reader, toSign, hf)
	if err != nil {
		return nil, nil, err
	}
	return sig, toSign, nil
}
