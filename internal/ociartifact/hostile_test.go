package ociartifact_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
)

// stallBound is the client's timeout in these tests: short, so a test
// shows the bound firing without waiting out the default.
const stallBound = 200 * time.Millisecond

// safetyNet bounds a call whose bound is broken, so that the test fails
// with what it got instead of hanging; nothing asserts on it.
const safetyNet = 20 * time.Second

// hangingServer accepts every request and never answers it.
func hangingServer(t *testing.T) string {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { registrytest.Hang(r, stop) }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	return strings.TrimPrefix(srv.URL, "http://")
}

// drippingServer answers every request with headers at once and then a
// body that drips.
func drippingServer(t *testing.T) string {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
		w.Header().Set("Content-Length", "1000000")
		registrytest.Drip(w, r, stop)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	return strings.TrimPrefix(srv.URL, "http://")
}

// A registry that accepts and hangs, a port that accepts TCP and stays
// silent, and one that drips its answer: Resolve, Pull and the remote
// options other packages use (signature lookups) each give up at the
// client's timeout with an error naming the registry and the setting,
// not when the caller's context ends.
func TestStalledRegistryIsGivenUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		host func(*testing.T) string
	}{
		{"hangs after accepting", hangingServer},
		{"silent port", func(t *testing.T) string { return registrytest.SilentPort(t) }},
		{"drips", drippingServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.host(t)
			c := client(t, ociartifact.Options{Timeout: stallBound}, host)
			check := func(step string, err error, ctx context.Context) {
				t.Helper()
				t.Logf("%s: %v", step, err)
				switch {
				case ctx.Err() != nil:
					t.Errorf("%s: still waiting when the test's safety net ended it: %v", step, err)
				case err == nil:
					t.Errorf("%s: no error", step)
				case !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), "within 200ms (plugins.fetchTimeout)"):
					t.Errorf("%s: %v, want an error naming %s and the bound", step, err, host)
				case !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("%s: %v is not a deadline", step, err)
				}
			}
			ref := host + "/org/p:v1"

			ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
			defer cancel()
			_, err := c.Resolve(ctx, ref)
			check("resolve", err, ctx)
			_, err = c.Pull(ctx, ref)
			check("pull", err, ctx)
			r, perr := c.ParseReference(ref)
			if perr != nil {
				t.Fatal(perr)
			}
			_, err = remote.Get(r, c.RemoteOptions(ctx)...)
			check("remote options", err, ctx)
		})
	}
}

// countingConns counts the bytes the client read off its connections.
type countingConns struct{ read atomic.Int64 }

func (c *countingConns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// A manifest that never ends (and an index, and the referrers list a
// signature lookup reads) is refused once it passes MaxManifestSize,
// read no further: the bytes the client read stay near the cap, not
// go-containerregistry's 100 MiB. A manifest that says it is larger is
// refused unread.
func TestEndlessManifestIsCut(t *testing.T) {
	var sent atomic.Int64
	chunk := []byte(strings.Repeat(" ", 32<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			return // the ping: no auth wanted
		case strings.Contains(r.URL.Path, "/declared/"):
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			w.Header().Set("Content-Length", "5000000")
			w.WriteHeader(http.StatusOK)
			w.Write(chunk)
			return
		case strings.Contains(r.URL.Path, "/referrers/"):
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
		case strings.Contains(r.URL.Path, "/manifests/"):
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
		default:
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"schemaVersion": 2, "annotations": {"x": "`))
		for {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ct := &countingConns{}
	c := client(t, ociartifact.Options{Transport: &http.Transport{DialContext: ct.dial}}, host)
	ctx := context.Background()
	const slack = 1 << 20 // read buffers past the cap

	_, err := c.Pull(ctx, host+"/org/p:v1")
	if err == nil || !strings.Contains(err.Error(), "over the 4MiB a manifest may be") {
		t.Errorf("endless manifest: %v", err)
	}
	t.Logf("endless manifest: client read %d bytes, server sent %d", ct.read.Load(), sent.Load())
	if n := ct.read.Load(); n > ociartifact.MaxManifestSize+slack {
		t.Errorf("the client read %d bytes of a manifest, past the %d cap", n, ociartifact.MaxManifestSize)
	}

	ct.read.Store(0)
	r, err := c.ParseReference(host + "/org/p@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Referrers(r.(name.Digest), c.RemoteOptions(ctx)...)
	if err == nil || !strings.Contains(err.Error(), "over the 4MiB a manifest may be") {
		t.Errorf("endless referrers list: %v", err)
	}
	if n := ct.read.Load(); n > ociartifact.MaxManifestSize+slack {
		t.Errorf("the client read %d bytes of a referrers list, past the %d cap", n, ociartifact.MaxManifestSize)
	}

	ct.read.Store(0)
	if _, err := c.Pull(ctx, host+"/declared/p:v1"); err == nil || !strings.Contains(err.Error(), "refused unread") {
		t.Errorf("a manifest declaring 5 MB: %v", err)
	}
	if n := ct.read.Load(); n > int64(len(chunk))+4096 {
		t.Errorf("the client read %d bytes of a manifest it should refuse unread", n)
	}
}

// An index that lists one module manifest many times is that module,
// read once; one that lists two is refused before any layer is
// downloaded. The registry counts the requests.
func TestPullIndexReadsLayersOnce(t *testing.T) {
	reg := registrytest.GGCR(t)
	ctx := context.Background()
	c := client(t, ociartifact.Options{}, reg.Host)
	d1, err := c.Push(ctx, module("i"), reg.Ref("many:a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := c.Push(ctx, module("j"), reg.Ref("many:b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	desc := func(d ociartifact.Descriptor, ref string) v1.Descriptor {
		h, _ := v1.NewHash(d.Digest)
		return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: mustSize(t, c, ref)}
	}
	one, two := desc(d1, reg.Ref("many:a")), desc(d2, reg.Ref("many:b"))
	count := func(f func()) (blobs, manifests int) {
		before := len(reg.Requests())
		f()
		for _, r := range reg.Requests()[before:] {
			switch {
			case strings.HasPrefix(r, "GET ") && strings.Contains(r, "/blobs/"):
				blobs++
			case strings.HasPrefix(r, "GET ") && strings.Contains(r, "/manifests/sha256:"):
				manifests++
			}
		}
		return blobs, manifests
	}

	same := make([]v1.Descriptor, 16)
	for i := range same {
		same[i] = one
	}
	reg.PutManifest(t, "many", "same", types.OCIImageIndex, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: same})
	blobs, manifests := count(func() {
		a, err := c.Pull(ctx, reg.Ref("many:same"))
		if err != nil || a.ManifestDigest != d1.Digest {
			t.Errorf("an index listing one module 16 times: %v", err)
		}
	})
	if blobs != 1 || manifests != 1 {
		t.Errorf("an index listing one module 16 times: %d blob and %d manifest downloads, want 1 each", blobs, manifests)
	}

	reg.PutManifest(t, "many", "two", types.OCIImageIndex, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{one, one, two, one, two}})
	blobs, _ = count(func() {
		_, err := c.Pull(ctx, reg.Ref("many:two"))
		if err == nil || !strings.Contains(err.Error(), d1.Digest) || !strings.Contains(err.Error(), d2.Digest) {
			t.Errorf("an index of two modules: %v", err)
		}
	})
	if blobs != 0 {
		t.Errorf("an index of two modules: %d blob downloads before refusing it, want 0", blobs)
	}
}
