package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// WatchProxy sits between a client and the apiserver on loopback and lets a
// test take the client's watches down. Cut ends every watch in flight and
// holds new ones; while they are held the test changes objects behind the
// client's back; Resume(expire=true) then answers the client's first
// attempt to resume its watch with 410 Gone, as an apiserver does when the
// resource version has been compacted, so the client must relist. That is
// the path on which client-go emits DeletedFinalStateUnknown.
type WatchProxy struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	held    chan struct{} // non-nil while watches are held; closed on Resume
	expire  bool          // answer the next resuming watch with 410
	cancels map[*http.Request]context.CancelFunc
}

// NewWatchProxy starts a proxy to the apiserver cfg reaches and returns the
// client configuration that goes through it (plain HTTP on loopback; the
// proxy authenticates upstream with cfg's credentials).
func NewWatchProxy(t testing.TB, cfg *rest.Config) (*WatchProxy, *rest.Config) {
	t.Helper()
	p := &WatchProxy{cancels: map[*http.Request]context.CancelFunc{}}
	p.proxy = reverseProxy(t, cfg)
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		p.Resume(false)
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p, &rest.Config{Host: p.srv.URL, QPS: cfg.QPS, Burst: cfg.Burst}
}

// Cut ends the watches in flight and holds new ones until Resume.
func (p *WatchProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
	for _, cancel := range p.cancels {
		cancel()
	}
}

// Resume lets held watches through. With expire, the first watch that asks
// to resume from a resource version gets 410 Gone instead.
func (p *WatchProxy) Resume(expire bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire = expire
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

func (p *WatchProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	if held := p.held; held != nil {
		p.mu.Unlock()
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
		p.mu.Lock()
	}
	// A watch that streams the initial state (watch-list) is a relist, not
	// a resume: only resumes are expired.
	resuming := q.Get("resourceVersion") != "" && q.Get("resourceVersion") != "0" && q.Get("sendInitialEvents") != "true"
	if p.expire && resuming {
		p.expire = false
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
			`"message":"too old resource version (forced by testenv.WatchProxy)","reason":"Expired","code":410}`))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	p.cancels[r] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.cancels, r)
		p.mu.Unlock()
		cancel()
	}()
	p.proxy.ServeHTTP(w, r.WithContext(ctx))
}
