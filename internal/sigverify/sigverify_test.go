package sigverify

import (
	"context"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
)

const (
	testIssuer  = "https://issuer.example.com"
	testSubject = "release@example.com"
)

// testRegistry is go-containerregistry's registry on loopback, with or
// without the referrers API.
type testRegistry struct {
	srv  *httptest.Server
	host string
}

func startRegistry(t *testing.T, referrers bool) *testRegistry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrers), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return &testRegistry{srv: srv, host: strings.TrimPrefix(srv.URL, "http://")}
}

// pushArtifact pushes a small image standing in for a plugin artifact to
// repo and returns its repository and manifest digest.
func (r *testRegistry) pushArtifact(t *testing.T, repo string) (string, string) {
	t.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	full := r.host + "/" + repo
	ref, err := name.ParseReference(full + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return full, d.String()
}

// keyFiles writes a fresh ECDSA P-256 key pair and returns the private
// PEM and the public key's file.
func keyFiles(t *testing.T) ([]byte, string) {
	t.Helper()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(file, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	return priv, file
}

func mustVerifier(t *testing.T, p Policy, opts ...Option) *Verifier {
	t.Helper()
	v, err := New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantVerified(t *testing.T, res Result, err error, signer string) {
	t.Helper()
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !res.Verified {
		t.Fatalf("not verified: %s", res.Reason)
	}
	if !strings.Contains(res.Signer, signer) {
		t.Fatalf("signer %q, want it to name %q", res.Signer, signer)
	}
}

func wantRefused(t *testing.T, res Result, err error, reason string) {
	t.Helper()
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("want ErrRefused, got err=%v result=%+v", err, res)
	}
	if res.Verified {
		t.Fatalf("verified, want refused: %+v", res)
	}
	t.Logf("refused: %s", res.Reason)
	if !strings.Contains(res.Reason, reason) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("reason %q (error %q), want it to say %q", res.Reason, err, reason)
	}
}

func TestKeySignedVerifies(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	priv, pub := keyFiles(t)
	ref, err := SignWithKey(ctx, "oci://"+repo, digest, priv)
	if err != nil {
		t.Fatal(err)
	}
	// The signature is where cosign v3 puts it: a referrer of the
	// digest with the bundle artifact type.
	d, err := name.NewDigest(repo + "@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Referrers(d)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != ref {
		t.Fatalf("referrers %+v, want the one signature %s", im.Manifests, ref)
	}
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digest)
	wantVerified(t, res, err, pub)
	if res.Cached {
		t.Fatal("first verification came from the cache")
	}
}

func TestWrongKeyRefused(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	priv, _ := keyFiles(t)
	_, other := keyFiles(t)
	if _, err := SignWithKey(ctx, repo, digest, priv); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, Policy{Required: true, Keys: []string{other}})
	res, err := v.Verify(ctx, repo, digest)
	wantRefused(t, res, err, "wrong key")
}

func TestUnsignedRequiredRefused(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	_, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digest)
	wantRefused(t, res, err, "unsigned")
}

func TestUnsignedNotRequiredAllowedWithReport(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	_, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Required: false, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digest)
	if err != nil {
		t.Fatalf("not required, but Verify failed: %v", err)
	}
	if res.Verified || !strings.Contains(res.Reason, "unsigned") {
		t.Fatalf("want unverified with reason unsigned, got %+v", res)
	}
}

// A signature made for digest A and attached to digest B does not count
// for B: the statement's subject is what binds.
func TestSignatureForAnotherDigestRefused(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digestA := reg.pushArtifact(t, "plugins/logger")
	_, digestB := reg.pushArtifact(t, "plugins/logger")
	priv, pub := keyFiles(t)
	bundleA := keyBundle(t, repo, digestA, priv)
	if _, err := AttachBundle(ctx, repo, digestB, bundleA); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digestB)
	wantRefused(t, res, err, "digest mismatch")
	// and it still counts for A once attached there
	if _, err := AttachBundle(ctx, repo, digestA, bundleA); err != nil {
		t.Fatal(err)
	}
	res, err = v.Verify(ctx, repo, digestA)
	wantVerified(t, res, err, pub)
}

// keyBundle is what SignWithKey attaches, without attaching it.
func keyBundle(t *testing.T, repo, digest string, privPEM []byte) []byte {
	t.Helper()
	ref, hash, err := parseRef(repo, digest)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := newKeyPair(priv)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := signStatement(ref, hash)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: bundle.IntotoMediaType}, kp, sign.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Without the referrers API, go-containerregistry keeps the referrers in
// the tag sha256-<hex>; Verify finds the signature there.
func TestTagFallbackWithoutReferrersAPI(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, false)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	priv, pub := keyFiles(t)
	if _, err := SignWithKey(ctx, repo, digest, priv); err != nil {
		t.Fatal(err)
	}
	tag := repo + ":" + strings.Replace(digest, ":", "-", 1)
	tagRef, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tagRef); err != nil {
		t.Fatalf("the referrers tag %s is missing: %v", tag, err)
	}
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digest)
	wantVerified(t, res, err, pub)
}

// The legacy tag sha256-<hex>.sig: a sigstore bundle layer, and cosign's
// simple-signing layer signed with a key.
func TestLegacySigTag(t *testing.T) {
	ctx := context.Background()
	priv, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})

	t.Run("bundle", func(t *testing.T) {
		reg := startRegistry(t, false)
		repo, digest := reg.pushArtifact(t, "plugins/logger")
		pushLegacy(t, repo, digest, static.NewLayer(keyBundle(t, repo, digest, priv), BundleMediaType))
		res, err := v.Verify(ctx, repo, digest)
		wantVerified(t, res, err, pub)
		if !strings.Contains(res.Reason, ".sig") {
			t.Fatalf("reason %q does not say the legacy tag", res.Reason)
		}
	})
	t.Run("simple-signing", func(t *testing.T) {
		reg := startRegistry(t, false)
		repo, digest := reg.pushArtifact(t, "plugins/logger")
		payload := simpleSigningPayload(repo, digest)
		pushLegacy(t, repo, digest, simpleSigningLayer(t, payload, priv))
		res, err := v.Verify(ctx, repo, digest)
		wantVerified(t, res, err, pub)
	})
	t.Run("simple-signing for another digest", func(t *testing.T) {
		reg := startRegistry(t, false)
		repo, digest := reg.pushArtifact(t, "plugins/logger")
		_, other := reg.pushArtifact(t, "plugins/logger")
		pushLegacy(t, repo, digest, simpleSigningLayer(t, simpleSigningPayload(repo, other), priv))
		res, err := v.Verify(ctx, repo, digest)
		wantRefused(t, res, err, "digest mismatch")
	})
	t.Run("simple-signing wrong key", func(t *testing.T) {
		reg := startRegistry(t, false)
		repo, digest := reg.pushArtifact(t, "plugins/logger")
		otherPriv, _ := keyFiles(t)
		pushLegacy(t, repo, digest, simpleSigningLayer(t, simpleSigningPayload(repo, digest), otherPriv))
		res, err := v.Verify(ctx, repo, digest)
		wantRefused(t, res, err, "wrong key")
	})
}

func simpleSigningPayload(repo, digest string) []byte {
	return []byte(`{"critical":{"identity":{"docker-reference":"` + repo + `"},"image":{"docker-manifest-digest":"` + digest + `"},"type":"cosign container image signature"},"optional":null}`)
}

func simpleSigningLayer(t *testing.T, payload, privPEM []byte) v1.Layer {
	t.Helper()
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.LoadDefaultSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.SignMessage(strings.NewReader(string(payload)))
	if err != nil {
		t.Fatal(err)
	}
	return annotatedLayer{static.NewLayer(payload, SimpleSigningMediaType), map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)}}
}

// annotatedLayer carries descriptor annotations into mutate.Append.
type annotatedLayer struct {
	v1.Layer
	annotations map[string]string
}

func pushLegacy(t *testing.T, repo, digest string, l v1.Layer) {
	t.Helper()
	add := mutate.Addendum{Layer: l}
	if a, ok := l.(annotatedLayer); ok {
		add = mutate.Addendum{Layer: a.Layer, Annotations: a.annotations}
	}
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), add)
	if err != nil {
		t.Fatal(err)
	}
	tag := repo + ":" + strings.Replace(digest, ":", "-", 1) + ".sig"
	tagRef, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tagRef, img); err != nil {
		t.Fatal(err)
	}
}

// --- keyless, with sigstore-go's virtual sigstore as Fulcio, Rekor and TSA

type keylessOpts struct {
	tsa            bool      // an RFC 3161 timestamp
	set            bool      // the log's signed entry timestamp
	integratedTime time.Time // zero: a minute after the certificate starts
	predicateType  string
}

// trustedRootFile writes vs's trusted root as a trusted_root.json. The
// virtual sigstore names its logs by the hex of their ID where a real
// trusted root has the raw ID, so the IDs are put right first.
func trustedRootFile(t *testing.T, vs *ca.VirtualSigstore) string {
	t.Helper()
	return trustedRootFileWithCA(t, vs, vs)
}

// trustedRootFileWithCA is vs's trusted root with the Fulcio CA of
// another virtual sigstore.
func trustedRootFileWithCA(t *testing.T, vs, fulcio *ca.VirtualSigstore) string {
	t.Helper()
	fix := func(logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
		out := map[string]*root.TransparencyLog{}
		for id, l := range logs {
			raw, err := hex.DecodeString(id)
			if err != nil {
				t.Fatal(err)
			}
			c := *l
			c.ID = raw
			out[id] = &c
		}
		return out
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, fulcio.FulcioCertificateAuthorities(), fix(vs.CTLogs()), vs.TimestampingAuthorities(), fix(vs.RekorLogs()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// keylessBundle signs a cosign v3 statement for digest as identity with
// a certificate of vs, logged in vs's Rekor with an inclusion proof.
func keylessBundle(t *testing.T, vs *ca.VirtualSigstore, repo, digest, identity string, o keylessOpts) []byte {
	t.Helper()
	ref, hash, err := parseRef(repo, digest)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := signStatement(ref, hash)
	if err != nil {
		t.Fatal(err)
	}
	if o.predicateType != "" {
		var m map[string]any
		_ = json.Unmarshal(stmt, &m)
		m["predicateType"] = o.predicateType
		stmt, _ = json.Marshal(m)
	}
	at := o.integratedTime
	if at.IsZero() {
		at = time.Now().Add(time.Minute)
	}
	ent, err := vs.AttestAtTime(identity, testIssuer, stmt, at, true)
	if err != nil {
		t.Fatal(err)
	}
	vc, _ := ent.VerificationContent()
	sc, _ := ent.SignatureContent()
	env := sc.EnvelopeContent().RawEnvelope()
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var sigs []*protodsse.Signature
	for _, s := range env.Signatures {
		raw, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, &protodsse.Signature{Sig: raw, Keyid: s.KeyID})
	}
	entries, _ := ent.TlogEntries()
	var tles []*protorekor.TransparencyLogEntry
	for _, e := range entries {
		tle := e.TransparencyLogEntry()
		tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
		if o.set {
			set, err := vs.RekorSignPayload(tlog.RekorPayload{
				Body:           e.Body(),
				IntegratedTime: tle.IntegratedTime,
				LogIndex:       tle.LogIndex,
				LogID:          hex.EncodeToString(tle.LogId.KeyId),
			})
			if err != nil {
				t.Fatal(err)
			}
			tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
		}
		tles = append(tles, tle)
	}
	pb := &protobundle.Bundle{
		MediaType: BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries: tles,
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{Payload: payload, PayloadType: env.PayloadType, Signatures: sigs}},
	}
	if o.tsa {
		ts, _ := ent.Timestamps()
		tvd := &protobundle.TimestampVerificationData{}
		for _, b := range ts {
			tvd.Rfc3161Timestamps = append(tvd.Rfc3161Timestamps, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: b})
		}
		pb.VerificationMaterial.TimestampVerificationData = tvd
	}
	raw, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func newVirtualSigstore(t *testing.T) *ca.VirtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestKeyless(t *testing.T) {
	ctx := context.Background()
	vs := newVirtualSigstore(t)
	trusted := trustedRootFile(t, vs)
	exact := Policy{Required: true, TrustedRoot: trusted, Identities: []Identity{{Issuer: testIssuer, Subject: testSubject}}}

	cases := []struct {
		name     string
		policy   Policy
		identity string
		opts     keylessOpts
		want     string // "" verified, else the reason's kind
	}{
		{name: "verified with a timestamp authority", policy: exact, identity: testSubject, opts: keylessOpts{tsa: true}},
		{name: "verified with the log's signed entry timestamp", policy: exact, identity: testSubject, opts: keylessOpts{set: true}},
		{name: "verified by regular expressions", identity: testSubject, opts: keylessOpts{tsa: true, set: true},
			policy: Policy{Required: true, TrustedRoot: trusted, Identities: []Identity{{IssuerRegExp: `^https://issuer\.example\.com$`, SubjectRegExp: `^[a-z]+@example\.com$`}}}},
		{name: "wrong identity", policy: exact, identity: "mallory@example.com", opts: keylessOpts{tsa: true}, want: "wrong identity"},
		{name: "wrong issuer", identity: testSubject, opts: keylessOpts{tsa: true}, want: "wrong identity",
			policy: Policy{Required: true, TrustedRoot: trusted, Identities: []Identity{{Issuer: "https://other.example.com", Subject: testSubject}}}},
		{name: "no timestamp", policy: exact, identity: testSubject, opts: keylessOpts{}, want: "no trusted timestamp"},
		{name: "expired certificate", policy: exact, identity: testSubject, opts: keylessOpts{set: true, integratedTime: time.Now().Add(30 * time.Minute)}, want: "expired certificate"},
		{name: "an attestation is not a signature", policy: exact, identity: testSubject, opts: keylessOpts{tsa: true, predicateType: "https://slsa.dev/provenance/v1"}, want: "not a signature"},
		{name: "untrusted CA", identity: testSubject, opts: keylessOpts{tsa: true}, want: "untrusted CA",
			policy: Policy{Required: true, TrustedRoot: trustedRootFileWithCA(t, vs, newVirtualSigstore(t)), Identities: exact.Identities}},
		{name: "log not in the trusted root", identity: testSubject, opts: keylessOpts{tsa: true}, want: "transparency log",
			policy: Policy{Required: true, TrustedRoot: trustedRootFile(t, newVirtualSigstore(t)), Identities: exact.Identities}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := startRegistry(t, true)
			repo, digest := reg.pushArtifact(t, "plugins/logger")
			if _, err := AttachBundle(ctx, repo, digest, keylessBundle(t, vs, repo, digest, c.identity, c.opts)); err != nil {
				t.Fatal(err)
			}
			v := mustVerifier(t, c.policy)
			res, err := v.Verify(ctx, repo, digest)
			if c.want == "" {
				wantVerified(t, res, err, c.identity+" (issuer "+testIssuer+")")
				return
			}
			wantRefused(t, res, err, c.want)
		})
	}
}

// A key policy does not accept a keyless signature, nor the reverse.
func TestKeyAndKeylessDoNotStandInForEachOther(t *testing.T) {
	ctx := context.Background()
	vs := newVirtualSigstore(t)
	trusted := trustedRootFile(t, vs)
	priv, pub := keyFiles(t)
	reg := startRegistry(t, true)

	repo, keyless := reg.pushArtifact(t, "plugins/a")
	if _, err := AttachBundle(ctx, repo, keyless, keylessBundle(t, vs, repo, keyless, testSubject, keylessOpts{tsa: true})); err != nil {
		t.Fatal(err)
	}
	res, err := mustVerifier(t, Policy{Required: true, Keys: []string{pub}}).Verify(ctx, repo, keyless)
	wantRefused(t, res, err, "wrong identity")

	_, keyed := reg.pushArtifact(t, "plugins/a")
	if _, err := SignWithKey(ctx, repo, keyed, priv); err != nil {
		t.Fatal(err)
	}
	res, err = mustVerifier(t, Policy{Required: true, TrustedRoot: trusted, Identities: []Identity{{Issuer: testIssuer, Subject: testSubject}}}).Verify(ctx, repo, keyed)
	wantRefused(t, res, err, "wrong key")
}

// After one verification the result is in the cache file: a Verifier
// started afresh (a restart) answers with the registry gone, and a
// changed policy is not answered from the old result.
func TestCacheHitNeedsNoRegistry(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	priv, pub := keyFiles(t)
	if _, err := SignWithKey(ctx, repo, digest, priv); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "signatures.json")
	cache, err := OpenCache(file)
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{Required: true, Keys: []string{pub}}
	res, err := mustVerifier(t, policy, WithCache(cache)).Verify(ctx, repo, digest)
	wantVerified(t, res, err, pub)

	reg.srv.Close()

	again, err := OpenCache(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err = mustVerifier(t, policy, WithCache(again)).Verify(ctx, repo, digest)
	wantVerified(t, res, err, pub)
	if !res.Cached {
		t.Fatalf("verified again without the cache: %+v", res)
	}

	_, otherPub := keyFiles(t)
	res, err = mustVerifier(t, Policy{Required: true, Keys: []string{otherPub}}, WithCache(again)).Verify(ctx, repo, digest)
	wantRefused(t, res, err, "could not look for signatures")
}

func TestPolicyErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	notKey := filepath.Join(dir, "notakey.pub")
	if err := os.WriteFile(notKey, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	notRoot := filepath.Join(dir, "trusted_root.json")
	if err := os.WriteFile(notRoot, []byte(`{"mediaType":"nope"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, pub := keyFiles(t)
	cases := []struct {
		name   string
		policy Policy
		want   []string
	}{
		{"missing key file", Policy{Keys: []string{filepath.Join(dir, "missing.pub")}}, []string{"missing.pub", "no such file"}},
		{"not a PEM key", Policy{Keys: []string{notKey}}, []string{notKey, "not a PEM public key"}},
		{"not a trusted root", Policy{TrustedRoot: notRoot, Identities: []Identity{{Issuer: testIssuer, Subject: testSubject}}}, []string{notRoot, "trusted_root.json"}},
		{"identity without trusted root", Policy{Identities: []Identity{{Issuer: testIssuer, Subject: testSubject}}}, []string{"trusted root"}},
		{"identity without subject", Policy{Keys: []string{pub}, Identities: []Identity{{Issuer: testIssuer}}}, []string{"identity 1", "no subject"}},
		{"bad regular expression", Policy{TrustedRoot: notRoot, Identities: []Identity{{Issuer: testIssuer, SubjectRegExp: "("}}}, []string{"identity 1", "regular expression"}},
		{"required with nothing to check", Policy{Required: true}, []string{"required", "no key and no identity"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.policy)
			if err == nil {
				t.Fatal("New accepted the policy")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestBadDigestIsAnError(t *testing.T) {
	_, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Keys: []string{pub}})
	if _, err := v.Verify(context.Background(), "127.0.0.1:1/x", "latest"); err == nil || !strings.Contains(err.Error(), "sha256:") {
		t.Fatalf("want an error asking for sha256:<hex>, got %v", err)
	}
}

// SignWithKey takes the keys people have: cosign's encrypted key with its
// password, RSA, Ed25519; and verification accepts each with its public
// half.
func TestSignWithKeyKinds(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	password := []byte("correct horse")
	cases := []struct {
		name string
		gen  func() (priv, pub []byte, err error)
		opts []Option
	}{
		{"cosign encrypted ECDSA", func() ([]byte, []byte, error) {
			return cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc(password))
		}, []Option{WithKeyPassword(password)}},
		{"RSA", func() ([]byte, []byte, error) { return cryptoutils.GeneratePEMEncodedRSAKeyPair(2048, nil) }, nil},
		{"Ed25519", func() ([]byte, []byte, error) {
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return nil, nil, err
			}
			privPEM, err := cryptoutils.MarshalPrivateKeyToPEM(priv)
			if err != nil {
				return nil, nil, err
			}
			pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(pub)
			return privPEM, pubPEM, err
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			priv, pub, err := c.gen()
			if err != nil {
				t.Fatal(err)
			}
			pubFile := filepath.Join(t.TempDir(), "key.pub")
			if err := os.WriteFile(pubFile, pub, 0o600); err != nil {
				t.Fatal(err)
			}
			repo, digest := reg.pushArtifact(t, "plugins/kinds")
			if _, err := SignWithKey(ctx, repo, digest, priv, c.opts...); err != nil {
				t.Fatal(err)
			}
			res, err := mustVerifier(t, Policy{Required: true, Keys: []string{pubFile}}).Verify(ctx, repo, digest)
			wantVerified(t, res, err, pubFile)
		})
	}
	t.Run("encrypted key without its password", func(t *testing.T) {
		priv, _, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc(password))
		if err != nil {
			t.Fatal(err)
		}
		repo, digest := reg.pushArtifact(t, "plugins/kinds")
		if _, err := SignWithKey(ctx, repo, digest, priv); err == nil || !strings.Contains(err.Error(), "private key") {
			t.Fatalf("want a private key error, got %v", err)
		}
	})
}

// cosign's legacy keyless signature: a simple-signing layer with the
// certificate and the Rekor bundle (entry and signed entry timestamp) in
// annotations, at the tag sha256-<hex>.sig.
func TestLegacyKeylessSimpleSigning(t *testing.T) {
	ctx := context.Background()
	vs := newVirtualSigstore(t)
	policy := Policy{Required: true, TrustedRoot: trustedRootFile(t, vs), Identities: []Identity{{Issuer: testIssuer, Subject: testSubject}}}
	layer := func(t *testing.T, payload []byte, identity string) v1.Layer {
		t.Helper()
		ent, err := vs.Sign(identity, testIssuer, payload)
		if err != nil {
			t.Fatal(err)
		}
		vc, _ := ent.VerificationContent()
		sc, _ := ent.SignatureContent()
		certPEM, err := cryptoutils.MarshalCertificateToPEM(vc.Certificate())
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := ent.TlogEntries()
		e := entries[0]
		tle := e.TransparencyLogEntry()
		var rb rekorBundle
		rb.Payload.Body = e.Body().(string)
		rb.Payload.IntegratedTime = tle.IntegratedTime
		rb.Payload.LogIndex = tle.LogIndex
		rb.Payload.LogID = hex.EncodeToString(tle.LogId.KeyId)
		rb.SignedEntryTimestamp, err = vs.RekorSignPayload(tlog.RekorPayload{Body: rb.Payload.Body, IntegratedTime: rb.Payload.IntegratedTime, LogIndex: rb.Payload.LogIndex, LogID: rb.Payload.LogID})
		if err != nil {
			t.Fatal(err)
		}
		rbJSON, err := json.Marshal(rb)
		if err != nil {
			t.Fatal(err)
		}
		return annotatedLayer{static.NewLayer(payload, SimpleSigningMediaType), map[string]string{
			signatureAnnotation:   base64.StdEncoding.EncodeToString(sc.Signature()),
			certificateAnnotation: string(certPEM),
			rekorBundleAnnotation: string(rbJSON),
		}}
	}
	t.Run("verified", func(t *testing.T) {
		reg := startRegistry(t, false)
		repo, digest := reg.pushArtifact(t, "plugins/legacy")
		pushLegacy(t, repo, digest, layer(t, simpleSigningPayload(repo, digest), testSubject))
		res, err := mustVerifier(t, policy).Verify(ctx, repo, digest)
		wantVerified(t, res, err, testSubject+" (issuer "+testIssuer+")")
	})
	t.Run("wrong identity", func(t *testing.T) {
		reg := startRegistry(t, false)
		repo, digest := reg.pushArtifact(t, "plugins/legacy")
		pushLegacy(t, repo, digest, layer(t, simpleSigningPayload(repo, digest), "mallory@example.com"))
		res, err := mustVerifier(t, policy).Verify(ctx, repo, digest)
		wantRefused(t, res, err, "wrong identity")
	})
}
