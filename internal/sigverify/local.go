package sigverify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WithLocalLayout makes the Verifier look for signatures in the OCI
// image layout dir before the registry: where `informer-host bundle
// load` puts the signatures a bundle carries (ociartifact's
// Store.SignatureDir), so `verify: required` works on a site with no
// registry. The layout is read on every lookup (a bundle loaded later
// counts) and may not exist. What is found there is checked exactly as
// what a registry serves: the layout only stands in for the registry.
func WithLocalLayout(dir string) Option { return func(op *options) { op.local = dir } }

// verifyLocalThenRemote is Verify's lookup with a local layout: a
// signature verified there is enough; otherwise the registry is asked,
// and what the layout held (or that it held nothing, and how a bundle
// comes to carry signatures) is part of the reason.
func (v *Verifier) verifyLocalThenRemote(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, error) {
	if v.local == "" {
		return v.verifyRemote(ctx, ref, hash)
	}
	local, candidates := v.verifyLocal(ctx, ref, hash)
	if local.Verified {
		return local, nil
	}
	why := local.Reason
	if candidates == 0 {
		why = fmt.Sprintf("no signature of %s in %s, where `informer-host bundle load` puts the signatures a bundle carries: "+
			"`informer-host bundle save` includes a module's signatures, so sign the module in its registry "+
			"(informer-host sign, or cosign sign), then save and load the bundle again", hash, v.local)
	}
	res, err := v.verifyRemote(ctx, ref, hash)
	if err != nil {
		return res, fmt.Errorf("%s; and the registry: %w", why, err)
	}
	if !res.Verified {
		res.Reason = why + "; and the registry: " + res.Reason
	}
	return res, nil
}

// verifyLocal runs the registry lookup against the layout, served by
// layoutTransport; it returns how many signature artifacts of hash the
// layout holds.
func (v *Verifier) verifyLocal(ctx context.Context, ref name.Digest, hash v1.Hash) (Result, int) {
	lp, err := layout.FromPath(v.local)
	if err != nil {
		return Result{}, 0 // no bundle has brought signatures
	}
	t := &layoutTransport{lp: lp}
	n := len(t.referrers(hash)) + len(t.tagged(legacyTag(hash)))
	if n == 0 {
		return Result{}, 0
	}
	lv := *v
	lv.remote = []remote.Option{remote.WithTransport(t)}
	lv.locations = nil // the layout is the one place to look
	res, err := lv.verifyRemote(ctx, ref, hash)
	if err != nil {
		return Result{Reason: fmt.Sprintf("the signatures of %s in %s: %v", hash, v.local, err)}, n
	}
	if res.Verified {
		res.Reason += " (in " + v.local + ", from a bundle)"
	} else {
		res.Reason = "in " + v.local + " (from a bundle): " + res.Reason
	}
	return res, n
}

// layoutTransport answers the registry API requests signature lookup
// makes (manifests, blobs, referrers), read-only, from an OCI image
// layout. Content is found by digest, and the legacy .sig tag by its
// name alone, whatever the repository: a signature is bound to the
// digest it signs, which the verifier checks, not to where it was kept.
type layoutTransport struct{ lp layout.Path }

func (t *layoutTransport) index() []v1.Descriptor {
	idx, err := t.lp.ImageIndex()
	if err != nil {
		return nil
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil
	}
	return im.Manifests
}

// referrers are the layout's manifests whose subject is hash, described
// as a registry's referrers API does.
func (t *layoutTransport) referrers(hash v1.Hash) []v1.Descriptor {
	var out []v1.Descriptor
	for _, d := range t.index() {
		raw, err := t.lp.Bytes(d.Digest)
		if err != nil || len(raw) > maxBlobBytes {
			continue
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil || m.Subject == nil || m.Subject.Digest != hash {
			continue
		}
		d.ArtifactType = m.ArtifactType
		if d.ArtifactType == "" {
			d.ArtifactType = string(m.Config.MediaType)
		}
		d.Annotations = m.Annotations
		out = append(out, d)
	}
	return out
}

// tagged are the layout's entries named by tag (their ref.name's tag).
func (t *layoutTransport) tagged(tag string) []v1.Descriptor {
	var out []v1.Descriptor
	for _, d := range t.index() {
		if strings.HasSuffix(d.Annotations["org.opencontainers.image.ref.name"], ":"+tag) {
			out = append(out, d)
		}
	}
	return out
}

func (t *layoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	if p == "" || p == "/v2" {
		return respond(req, http.StatusOK, "application/json", "", []byte("{}")), nil
	}
	for _, kind := range []string{"/manifests/", "/blobs/", "/referrers/"} {
		i := strings.LastIndex(p, kind)
		if i < 0 {
			continue
		}
		what := p[i+len(kind):]
		if kind == "/referrers/" {
			h, err := v1.NewHash(what)
			if err != nil {
				break
			}
			b, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: t.referrers(h)})
			if err != nil {
				return nil, err
			}
			return respond(req, http.StatusOK, string(types.OCIImageIndex), "", b), nil
		}
		h, err := v1.NewHash(what)
		if err != nil && kind == "/manifests/" {
			tagged := t.tagged(what)
			if len(tagged) == 0 {
				break
			}
			h, err = tagged[len(tagged)-1].Digest, nil
		}
		if err != nil {
			break
		}
		b, err := t.lp.Bytes(h)
		if err != nil || len(b) > maxBlobBytes {
			break
		}
		mt := "application/octet-stream"
		if kind == "/manifests/" {
			var m struct {
				MediaType string `json:"mediaType"`
			}
			_ = json.Unmarshal(b, &m)
			mt = m.MediaType
		}
		return respond(req, http.StatusOK, mt, h.String(), b), nil
	}
	return respond(req, http.StatusNotFound, "application/json", "",
		[]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"not in the local signature layout"}]}`)), nil
}

func respond(req *http.Request, code int, contentType, digest string, body []byte) *http.Response {
	h := http.Header{"Content-Type": {contentType}, "Content-Length": {strconv.Itoa(len(body))}}
	if digest != "" {
		h.Set("Docker-Content-Digest", digest)
	}
	if req.Method == http.MethodHead {
		body = nil
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}
