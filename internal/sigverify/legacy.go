package sigverify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// simpleSigning is the part of cosign's simple-signing payload that binds
// it to an image.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// maxLegacyLayers bounds how many layers of the .sig tag are looked at:
// cosign appends one per signature.
const maxLegacyLayers = 64

// checkLegacy looks at the tag sha256-<hex>.sig. It returns the signer
// (with the place in tried[0].why) when one layer verifies, else what
// each layer was; a missing tag is no error and nothing tried.
func (v *Verifier) checkLegacy(_ context.Context, ref name.Digest, hash v1.Hash, digest []byte, ropts []remote.Option) (string, []found, error) {
	tag := ref.Context().Tag(legacyTag(hash))
	img, err := remote.Image(tag, ropts...)
	if isNotFound(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading tag %s: %w", tag.TagStr(), err)
	}
	m, err := img.Manifest()
	if err != nil {
		return "", nil, fmt.Errorf("reading tag %s: %w", tag.TagStr(), err)
	}
	var tried []found
	for i, l := range m.Layers {
		if i >= maxLegacyLayers {
			break
		}
		where := fmt.Sprintf("tag %s layer %d", tag.TagStr(), i)
		mt := string(l.MediaType)
		switch {
		case strings.HasPrefix(mt, bundleMediaTypePrefix):
			raw, err := readBlob(ref.Context().Digest(l.Digest.String()), l.Size, ropts)
			if err != nil {
				tried = append(tried, found{where, err.Error()})
				continue
			}
			signer, why := v.checkBundle(raw, digest, hash)
			if signer != "" {
				return signer, []found{{where, "signature verified: sigstore bundle in " + where}}, nil
			}
			tried = append(tried, found{where, why})
		case mt == SimpleSigningMediaType:
			signer, why := v.checkSimpleSigning(ref, l, digest, hash, ropts)
			if signer != "" {
				return signer, []found{{where, "signature verified: cosign simple-signing in " + where}}, nil
			}
			tried = append(tried, found{where, why})
		default:
			tried = append(tried, found{where, fmt.Sprintf("layer of media type %q: neither a sigstore bundle nor cosign simple-signing", mt)})
		}
	}
	return "", tried, nil
}

// checkSimpleSigning verifies one simple-signing layer: the layer is the
// signed payload, the annotation its signature, with a key or (when the
// certificate annotation is there) keyless. It goes through sigstore-go
// as a message-signature bundle, so keys and identities are checked by
// the same code as everywhere else.
func (v *Verifier) checkSimpleSigning(ref name.Digest, l v1.Descriptor, digest []byte, hash v1.Hash, ropts []remote.Option) (signer, why string) {
	sigB64, ok := l.Annotations[signatureAnnotation]
	if !ok {
		return "", "simple-signing layer without the " + signatureAnnotation + " annotation"
	}
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return "", fmt.Sprintf("signature annotation is not base64: %v", err)
	}
	payload, err := readBlob(ref.Context().Digest(l.Digest.String()), l.Size, ropts)
	if err != nil {
		return "", err.Error()
	}
	var ss simpleSigning
	if err := json.Unmarshal(payload, &ss); err != nil {
		return "", fmt.Sprintf("simple-signing payload is not JSON: %v", err)
	}
	if !strings.EqualFold(ss.Critical.Image.DockerManifestDigest, hash.String()) {
		return "", fmt.Sprintf("digest mismatch: the payload signs %q, not %s", ss.Critical.Image.DockerManifestDigest, hash)
	}
	sum := sha256.Sum256(payload)
	pb := &protobundle.Bundle{
		MediaType: BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}},
	}
	if certPEM, keyless := l.Annotations[certificateAnnotation]; keyless {
		if why := legacyKeyless(pb, l.Annotations, certPEM); why != "" {
			return "", why
		}
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return "", fmt.Sprintf("simple-signing as a bundle: %v", err)
	}
	return v.checkEntity(b, func() verify.ArtifactPolicyOption { return verify.WithArtifact(bytes.NewReader(payload)) })
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation: the
// Rekor entry and its signed entry timestamp.
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	} `json:"Payload"`
}

// legacyKeyless turns pb into the v0.1 bundle sigstore-go verifies for a
// keyless simple-signing layer: the certificate annotation, and the
// Rekor entry with its signed entry timestamp from the bundle
// annotation (cosign's legacy signatures carry a promise, not a proof,
// which only a v0.1 bundle may). It returns why not, or "".
func legacyKeyless(pb *protobundle.Bundle, ann map[string]string, certPEM string) string {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(certPEM))
	if err != nil || len(certs) == 0 {
		return fmt.Sprintf("the %s annotation is not a PEM certificate (%v)", certificateAnnotation, err)
	}
	pb.MediaType = "application/vnd.dev.sigstore.bundle+json;version=0.1"
	pb.VerificationMaterial.Content = &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: certs[0].Raw}}
	raw, ok := ann[rekorBundleAnnotation]
	if !ok {
		return "keyless simple-signing without the " + rekorBundleAnnotation + " annotation: no transparency log entry to check"
	}
	var rb rekorBundle
	if err := json.Unmarshal([]byte(raw), &rb); err != nil {
		return fmt.Sprintf("the %s annotation is not JSON: %v", rekorBundleAnnotation, err)
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return fmt.Sprintf("the %s annotation's body is not base64: %v", rekorBundleAnnotation, err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return fmt.Sprintf("the %s annotation's logID is not hex: %v", rekorBundleAnnotation, err)
	}
	var kind struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kind); err != nil {
		return fmt.Sprintf("the Rekor entry is not JSON: %v", err)
	}
	pb.VerificationMaterial.TlogEntries = []*protorekor.TransparencyLogEntry{{
		LogIndex:          rb.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kind.Kind, Version: kind.APIVersion},
		IntegratedTime:    rb.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
		CanonicalizedBody: body,
	}}
	return ""
}
