package ociartifact_test

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/sigverify"
)

const (
	emptyType     = "application/vnd.oci.empty.v1+json"
	predicateAnno = "dev.sigstore.bundle.predicateType"
)

// Anyone who can push referrers must not be able to keep a good
// signature out of a bundle: 70 untyped referrers that are not
// signatures, 70 of another artifact type, 70 attestations and 70
// bundle-typed junk, all listed before the good signature, and one
// referrer listed first whose manifest the registry no longer serves,
// one whose blob fails, one whose blob is oversize, and a .sig tag that
// holds no signature.
// bundle save succeeds, and the bundle, loaded with the registry gone,
// verifies under a required key policy.
func TestBundleSaveKeepsTheGoodSignatureAmongJunk(t *testing.T) {
	for _, tc := range []struct {
		name            string
		junk, dangling  bool
		wantSkippedPart []string
	}{
		{name: "junk", junk: true, wantSkippedPart: []string{"70 of other artifact types", "70 attestations", "70 untyped"}},
		{name: "broken", dangling: true, wantSkippedPart: []string{"4 that could not be copied", "MANIFEST_UNKNOWN", "over the 1048576", "500", "and 1 more"}},
		{name: "both", junk: true, dangling: true, wantSkippedPart: []string{"70 attestations", "4 that could not be copied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			reg := registrytest.GGCR(t)
			c := client(t, ociartifact.Options{}, reg.Host)
			d, err := c.Push(ctx, module("signed"), reg.Ref("sig/a:v1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			repo, err := name.NewRepository(reg.Ref("sig/a"), name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			var first, last string // the referrers the registry lists first and last
			missing := map[string]bool{}
			reg.Tamper(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Header.Get("X-Test-Inner") != "" {
					return false
				}
				for dg := range missing {
					if strings.HasSuffix(r.URL.Path, "/manifests/"+dg) {
						http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
						return true
					}
					if strings.HasSuffix(r.URL.Path, "/blobs/"+dg) {
						http.Error(w, "disk on fire", http.StatusInternalServerError)
						return true
					}
				}
				if !strings.Contains(r.URL.Path, "/referrers/") {
					return false
				}
				reorderReferrers(w, r, reg.Host, first, last)
				return true
			})
			if tc.junk {
				for i := range 70 {
					junk := []byte(fmt.Sprintf(`{"junk":%d}`, i))
					pushReferrer(t, c, repo, d.Digest, emptyType, "application/octet-stream", junk, nil)
					pushReferrer(t, c, repo, d.Digest, "application/spdx+json", "application/spdx+json", junk, nil)
					pushReferrer(t, c, repo, d.Digest, sigverify.BundleMediaType, sigverify.BundleMediaType, junk,
						map[string]string{predicateAnno: "https://slsa.dev/provenance/v1"})
					pushReferrer(t, c, repo, d.Digest, sigverify.BundleMediaType, sigverify.BundleMediaType, junk, nil)
				}
			}
			if tc.dangling {
				// listed, but its manifest is gone; its blob fails; its
				// blob is over what a signature may take
				first = pushReferrer(t, c, repo, d.Digest, sigverify.BundleMediaType, sigverify.BundleMediaType, []byte(`{"gone":1}`), nil)
				missing[first] = true
				pushReferrer(t, c, repo, d.Digest, sigverify.BundleMediaType, sigverify.BundleMediaType, []byte(`{"failing":1}`), nil)
				missing[hashOf([]byte(`{"failing":1}`)).String()] = true
				pushReferrer(t, c, repo, d.Digest, sigverify.BundleMediaType, sigverify.BundleMediaType, []byte(`{"huge":1}`), nil,
					func(m *v1.Manifest) { m.Layers[0].Size = 2 << 20 })
				// and a .sig tag holding no signature
				reg.PutManifest(t, "sig/a", strings.Replace(d.Digest, ":", "-", 1)+".sig", types.OCIManifestSchema1, v1.Manifest{
					SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
					Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Digest: hashOf([]byte("{}")), Size: 2},
					Layers: []v1.Descriptor{{MediaType: "application/octet-stream", Digest: hashOf([]byte("{}")), Size: 2}}})
			}
			priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
			if err != nil {
				t.Fatal(err)
			}
			pubFile := filepath.Join(t.TempDir(), "cosign.pub")
			if err := os.WriteFile(pubFile, pub, 0o600); err != nil {
				t.Fatal(err)
			}
			if last, err = sigverify.SignWithKey(ctx, reg.Ref("sig/a"), d.Digest, priv, sigverify.WithRemoteOptions(c.RemoteOptions(ctx)...)); err != nil {
				t.Fatal(err)
			}

			var buf bytes.Buffer
			saved, err := c.SaveBundle(ctx, []string{reg.Ref("sig/a:v1")}, &buf)
			if err != nil {
				t.Fatalf("bundle save: %v", err)
			}
			t.Logf("saved: %+v", saved)
			if len(saved) != 1 || saved[0].Signatures == 0 {
				t.Errorf("the save's report: %+v", saved)
			}
			for _, part := range tc.wantSkippedPart {
				if len(saved) == 1 && !strings.Contains(saved[0].Skipped, part) {
					t.Errorf("what the save skipped does not say %q: %s", part, saved[0].Skipped)
				}
			}
			reg.Close() // the air gap

			dir := t.TempDir()
			if _, err := ociartifact.LoadBundle(ctx, bytes.NewReader(buf.Bytes()), ociartifact.Store{Dir: dir}, 0); err != nil {
				t.Fatalf("bundle load: %v", err)
			}
			v, err := sigverify.New(sigverify.Policy{Required: true, Keys: []string{pubFile}},
				sigverify.WithLocalLayout(ociartifact.Store{Dir: dir}.SignatureDir()), sigverify.WithRemoteOptions(c.RemoteOptions(ctx)...))
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.Verify(ctx, reg.Ref("sig/a"), d.Digest)
			if err != nil || !res.Verified {
				t.Fatalf("the signed module from the bundle: %+v %v", res, err)
			}
		})
	}
}

// reorderReferrers answers r with the registry's referrers list, first
// at its head and last at its end, as a registry may list them in any
// order.
func reorderReferrers(w http.ResponseWriter, r *http.Request, host, first, last string) {
	inner, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+host+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	inner.Header = r.Header.Clone()
	inner.Header.Set("X-Test-Inner", "1")
	resp, err := http.DefaultClient.Do(inner)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
		return
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(body, &im); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rank := func(d v1.Descriptor) int {
		switch d.Digest.String() {
		case first:
			return 0
		case last:
			return 2
		}
		return 1
	}
	sort.SliceStable(im.Manifests, func(i, j int) bool { return rank(im.Manifests[i]) < rank(im.Manifests[j]) })
	w.Header().Set("Content-Type", string(types.OCIImageIndex))
	_ = json.NewEncoder(w).Encode(im)
}

// pushReferrer pushes a referrer of digest to repo: a config of
// configType, one layer of layerType holding content, and annotations;
// it returns the referrer's manifest digest.
func pushReferrer(t *testing.T, c *ociartifact.Client, repo name.Repository, digest, configType, layerType string, content []byte, annotations map[string]string, fix ...func(*v1.Manifest)) string {
	t.Helper()
	opts := c.RemoteOptions(context.Background())
	config := []byte("{}")
	for _, b := range [][]byte{config, content} {
		if err := remote.WriteLayer(repo, static.NewLayer(b, "application/octet-stream"), opts...); err != nil {
			t.Fatal(err)
		}
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.MediaType(configType), Digest: hashOf(config), Size: int64(len(config))},
		Layers:        []v1.Descriptor{{MediaType: types.MediaType(layerType), Digest: hashOf(content), Size: int64(len(content))}},
		Subject:       &v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: 1},
		Annotations:   annotations,
	}
	for _, f := range fix {
		f(&m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	md := hashOf(raw)
	if err := remote.Put(repo.Digest(md.String()), rawManifest{raw, types.OCIManifestSchema1}, opts...); err != nil {
		t.Fatal(err)
	}
	return md.String()
}

func hashOf(b []byte) v1.Hash {
	h, _, _ := v1.SHA256(bytes.NewReader(b))
	return h
}

type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }
