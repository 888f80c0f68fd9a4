package sigverify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// startRegistryWith is startRegistry (with the referrers API) behind
// wrap, which sees every request first.
func startRegistryWith(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	srv := httptest.NewServer(wrap(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))))
	t.Cleanup(srv.Close)
	return &testRegistry{srv: srv, host: strings.TrimPrefix(srv.URL, "http://")}
}

// A key file replaced in place (a leaked key revoked) takes effect at the
// next verification: the same Verifier reads the new key, and the result
// cached under the old key no longer answers.
func TestReplacedKeyFileTakesEffect(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, true)
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	leaked, pub := keyFiles(t)
	if _, err := SignWithKey(ctx, repo, digest, leaked); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digest)
	wantVerified(t, res, err, pub)

	_, replacement := keyFiles(t)
	b, err := os.ReadFile(replacement)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, b, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = v.Verify(ctx, repo, digest)
	wantRefused(t, res, err, "wrong key")
	if res.Cached {
		t.Fatal("answered from the result cached under the replaced key")
	}

	// A key file gone is an error naming it, not the old key still
	// trusted.
	if err := os.Remove(pub); err != nil {
		t.Fatal(err)
	}
	res, err = v.Verify(ctx, repo, digest)
	if err == nil || res.Verified || !strings.Contains(err.Error(), pub) {
		t.Fatalf("with the key file removed: %+v, %v; want an error naming %s", res, err, pub)
	}
}

// stallingRegistry answers the version check and holds every other
// request until the client gives up: a registry that accepts a lookup
// and never answers. asked receives once a request is being held.
func stallingRegistry(t *testing.T) (host string, asked <-chan string) {
	t.Helper()
	ch := make(chan string, 64)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		select {
		case ch <- r.Method + " " + r.URL.Path:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: lets Close end its handlers
	return strings.TrimPrefix(srv.URL, "http://"), ch
}

const stalledDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// waitReturn fails the test when f has not returned a minute after
// cancel: a generous bound on what must be prompt.
func waitReturn(t *testing.T, what string, asked <-chan string, cancel func(), f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	if asked != nil {
		select {
		case <-asked:
		case err := <-done:
			t.Fatalf("%s returned before the registry was asked: %v", what, err)
		}
	}
	if cancel != nil {
		cancel()
	}
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits on the stalled registry after a minute", what)
	}
	return nil
}

// The caller's context governs every registry call, even when the
// registry options given to New carry a context of their own (the
// daemon's client options carry context.Background()).
func TestStalledRegistryFollowsTheCallersContext(t *testing.T) {
	host, asked := stallingRegistry(t)
	_, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}}, WithRemoteOptions(remote.WithContext(context.Background())))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := waitReturn(t, "Verify", asked, cancel, func() error {
		_, err := v.Verify(ctx, host+"/plugins/logger", stalledDigest)
		return err
	})
	if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Verify with its context cancelled: %v; want an error saying it was cancelled, not a refusal", err)
	}
}

func errors_Is_Refused(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrRefused.Error())
}

// Without a deadline from the caller, WithTimeout bounds each lookup: a
// stalled registry is a failure naming the stall.
func TestStalledRegistryTimesOut(t *testing.T) {
	host, _ := stallingRegistry(t)
	_, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}}, WithTimeout(200*time.Millisecond),
		WithRemoteOptions(remote.WithContext(context.Background())))
	var res Result
	err := waitReturn(t, "Verify", nil, nil, func() error {
		var err error
		res, err = v.Verify(context.Background(), host+"/plugins/logger", stalledDigest)
		return err
	})
	wantRefused(t, res, err, "did not answer within 200ms")
}

// Signing against a registry that never answers ends with the caller's
// context.
func TestSignStalledRegistryFollowsTheCallersContext(t *testing.T) {
	host, asked := stallingRegistry(t)
	priv, _ := keyFiles(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := waitReturn(t, "SignWithKey", asked, cancel, func() error {
		_, err := SignWithKey(ctx, host+"/plugins/logger", stalledDigest, priv, WithRemoteOptions(remote.WithContext(context.Background())))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("SignWithKey with its context cancelled: %v; want an error saying so", err)
	}
}

// Signatures are looked up where pulls look, mirrors first: a module and
// its signature only at the mirror verify with the origin down.
func TestSignatureAtAMirror(t *testing.T) {
	ctx := context.Background()
	origin := startRegistry(t, true)
	mirror := startRegistry(t, true)
	mrepo, digest := mirror.pushArtifact(t, "onsite/plugins/logger")
	priv, pub := keyFiles(t)
	if _, err := SignWithKey(ctx, mrepo, digest, priv); err != nil {
		t.Fatal(err)
	}
	origin.srv.Close()
	var asked []string
	locations := func(ref name.Digest) ([]name.Digest, error) {
		asked = append(asked, ref.String())
		m, err := name.NewDigest(mrepo + "@" + ref.DigestStr())
		return []name.Digest{m, ref}, err
	}
	orepo := origin.host + "/plugins/logger"
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}}, WithLocations(locations))
	res, err := v.Verify(ctx, orepo, digest)
	wantVerified(t, res, err, pub)
	if !strings.Contains(res.Reason, mirror.host) || len(asked) != 1 || asked[0] != orepo+"@"+digest {
		t.Fatalf("reason %q, locations asked for %v", res.Reason, asked)
	}

	// Unsigned everywhere: the reason says what each place had.
	_, unsigned := mirror.pushArtifact(t, "onsite/plugins/logger")
	res, err = v.Verify(ctx, orepo, unsigned)
	wantRefused(t, res, err, mirror.host)
	if !strings.Contains(res.Reason, origin.host) {
		t.Fatalf("reason %q does not say what the origin %s answered", res.Reason, origin.host)
	}
}

// pushReferrer pushes a referrer of digest in repo: a manifest whose
// config media type is configType (go-containerregistry's registry
// reports it as the artifactType, and the annotations with it) and whose
// one layer of layerType holds content.
func pushReferrer(t *testing.T, repo, digest, configType, layerType string, content []byte, annotations map[string]string) string {
	t.Helper()
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	config := static.NewLayer([]byte("{}"), types.MediaType(configType))
	layer := static.NewLayer(content, types.MediaType(layerType))
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(r, l); err != nil {
			t.Fatal(err)
		}
	}
	cd, _ := config.Digest()
	ld, _ := layer.Digest()
	h, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.MediaType(configType), Digest: cd, Size: 2},
		Layers:        []v1.Descriptor{{MediaType: types.MediaType(layerType), Digest: ld, Size: int64(len(content))}},
		Subject:       &v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: 1},
		Annotations:   annotations,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	md, _, _ := v1.SHA256(bytes.NewReader(raw))
	if err := remote.Put(r.Digest(md.String()), rawManifest{raw, types.OCIManifestSchema1}); err != nil {
		t.Fatal(err)
	}
	return md.String()
}

// Anyone who can push referrers must not be able to hide a good
// signature behind junk: 70 referrers of another artifact type, 70 with
// the bundle type and junk content and 70 with no type of their own and
// junk content, and 70 attestations, listed before the good signature,
// and the module still verifies; the reason of a refusal says what was
// skipped.
func TestJunkReferrersDoNotHideAGoodSignature(t *testing.T) {
	ctx := context.Background()
	var last string // the referrer the registry lists last
	reg := startRegistryWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.URL.Path, "/referrers/") {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var im v1.IndexManifest
			if err := json.Unmarshal(rec.Body.Bytes(), &im); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			sort.SliceStable(im.Manifests, func(i, j int) bool {
				return im.Manifests[j].Digest.String() == last && im.Manifests[i].Digest.String() != last
			})
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			_ = json.NewEncoder(w).Encode(im)
		})
	})
	repo, digest := reg.pushArtifact(t, "plugins/logger")
	for i := range 70 {
		junk := []byte(fmt.Sprintf(`{"junk":%d}`, i))
		pushReferrer(t, repo, digest, "application/spdx+json", "application/spdx+json", junk, nil)
		pushReferrer(t, repo, digest, BundleMediaType, BundleMediaType, junk, nil)
		pushReferrer(t, repo, digest, emptyMediaType, BundleMediaType, junk, nil)
		// cosign's attestations: bundles, but of another predicate
		pushReferrer(t, repo, digest, BundleMediaType, BundleMediaType, junk, map[string]string{predicateAnnotation: "https://slsa.dev/provenance/v1"})
	}
	priv, pub := keyFiles(t)
	v := mustVerifier(t, Policy{Required: true, Keys: []string{pub}})
	res, err := v.Verify(ctx, repo, digest)
	wantRefused(t, res, err, "70 of other artifact types")
	wantRefused(t, res, err, "70 attestations")

	good, err := SignWithKey(ctx, repo, digest, priv)
	if err != nil {
		t.Fatal(err)
	}
	last = good
	res, err = v.Verify(ctx, repo, digest)
	wantVerified(t, res, err, pub)
}
