package testenv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// SlowProxy sits between a client and the apiserver on loopback and holds
// every write (any method but GET) for Delay before forwarding it: a slow
// apiserver, or a slow admission webhook, as the client sees it. Reads go
// through at once, so informers behind it are not slowed.
type SlowProxy struct {
	srv *httptest.Server
	// Delay is how long each write is held (ns); 0 = not at all. A write
	// reads it when it arrives.
	Delay atomic.Int64
	// Canceled counts the held writes whose client gave up (never
	// forwarded).
	Canceled atomic.Int64
	// Writes counts the writes that arrived (held or not).
	Writes atomic.Int64
	closed chan struct{} // closed at the test's end: held writes give up
}

// NewSlowProxy starts a proxy to the apiserver cfg reaches and returns
// the client configuration that goes through it (plain HTTP on loopback;
// the proxy authenticates upstream with cfg's credentials).
func NewSlowProxy(t testing.TB, cfg *rest.Config) (*SlowProxy, *rest.Config) {
	t.Helper()
	p := &SlowProxy{closed: make(chan struct{})}
	rp := reverseProxy(t, cfg)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			// Read the body first: only then does the server notice the
			// client hanging up (r.Context ends).
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			p.Writes.Add(1)
			if d := time.Duration(p.Delay.Load()); d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-r.Context().Done():
					p.Canceled.Add(1)
					return
				case <-p.closed:
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(p.closed)
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p, &rest.Config{Host: p.srv.URL, QPS: cfg.QPS, Burst: cfg.Burst}
}

// reverseProxy forwards to the apiserver cfg reaches, authenticating
// with cfg's credentials; responses stream (watches).
func reverseProxy(t testing.TB, cfg *rest.Config) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{Transport: rt, FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host }}
}
