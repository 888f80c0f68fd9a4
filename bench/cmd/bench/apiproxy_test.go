package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The proxy forwards every request to the upstream and counts it in its
// class, reached through the kubeconfig it writes (TLS, its own CA).
func TestAPIProxyCounts(t *testing.T) {
	var seen []string
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Impersonate-User"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer upstream.Close()
	p, c := proxyClient(t, upstream, "plugin")
	defer p.close()
	ctx := context.Background()
	for _, req := range []*rest.Request{
		c.Get().AbsPath("/api/v1/namespaces/dst/configmaps"),
		c.Get().AbsPath("/api/v1/namespaces/dst/configmaps").Param("watch", "true"),
		c.Get().AbsPath("/api/v1/namespaces/dst/configmaps/a"),
		c.Patch("application/apply-patch+yaml").AbsPath("/api/v1/namespaces/dst/configmaps/a").Body([]byte(`{}`)),
		c.Delete().AbsPath("/api/v1/namespaces/dst/configmaps/a"),
		c.Post().AbsPath("/api/v1/namespaces/dst/configmaps").Body([]byte(`{}`)),
	} {
		if err := req.Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
	}
	want := requestClasses{Reads: 2, Watches: 1, Writes: 3}
	if got := p.counts(); got != want || got.total() != 6 {
		t.Errorf("counts = %+v; want %+v", got, want)
	}
	if len(seen) != 6 || seen[3] != "PATCH /api/v1/namespaces/dst/configmaps/a plugin" {
		t.Errorf("upstream saw %q; want the 6 requests, impersonation kept", seen)
	}
	if d := want.minus(requestClasses{Reads: 1, Writes: 1}); d != (requestClasses{Reads: 1, Watches: 1, Writes: 2}) {
		t.Errorf("minus = %+v", d)
	}
}

// proxyClient starts a proxy to upstream and returns it with a client
// reaching it through the kubeconfig it writes, impersonating user
// unless "".
func proxyClient(t *testing.T, upstream *httptest.Server, user string) (*apiProxy, *rest.RESTClient) {
	t.Helper()
	p, err := newAPIProxy(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pemCert(upstream.Certificate().Raw)}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.writeKubeconfig(path); err != nil {
		p.close()
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		p.close()
		t.Fatal(err)
	}
	cfg.Impersonate.UserName = user
	c, err := rest.UnversionedRESTClientFor(withJSON(cfg))
	if err != nil {
		p.close()
		t.Fatal(err)
	}
	return p, c
}

func withJSON(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = nil
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// cut ends every watch in flight cleanly, as the apiserver ends one (the
// reflector then resumes from its resourceVersion); armed, the next watch
// that resumes gets the 410 Expired a compacted revision gets, while the
// watch that sends the initial events (a relist) goes through; lists of
// the counted resource are counted.
func TestAPIProxyCut(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"dst","resourceVersion":"5"}}}` + "\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer upstream.Close()
	p, c := proxyClient(t, upstream, "")
	defer p.close()
	p.countLists("configmaps")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watchFrom := func(rv string, initial bool) watch.Interface {
		t.Helper()
		req := c.Get().AbsPath("/api/v1/namespaces/dst/configmaps").Param("watch", "true").Param("resourceVersion", rv)
		if initial {
			req = req.Param("sendInitialEvents", "true")
		}
		w, err := req.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	next := func(w watch.Interface) (watch.Event, bool) {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			return ev, ok
		case <-ctx.Done():
			t.Fatal("no event within a minute")
			return watch.Event{}, false
		}
	}

	w := watchFrom("5", false)
	if ev, ok := next(w); !ok || ev.Type != watch.Added {
		t.Fatalf("first event %v %v; want ADDED", ev.Type, ok)
	}
	if n := p.cut(true); n != 1 {
		t.Errorf("cut ended %d watches; want 1", n)
	}
	if ev, ok := next(w); ok {
		t.Fatalf("after the cut the watch sent %v %+v; want its clean end", ev.Type, ev.Object)
	}

	relist := watchFrom("", true)
	if ev, ok := next(relist); !ok || ev.Type != watch.Added {
		t.Fatalf("the watch sending the initial events got %v %v; want ADDED from upstream", ev.Type, ok)
	}
	relist.Stop()
	resumed := watchFrom("5", false)
	ev, ok := next(resumed)
	if !ok || ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
		t.Fatalf("the resumed watch got %v %+v; want an ERROR event with a 410 Expired", ev.Type, ev.Object)
	}
	resumed.Stop()
	again := watchFrom("5", false)
	if ev, ok := next(again); !ok || ev.Type != watch.Added {
		t.Fatalf("the next watch got %v %v; want ADDED from upstream (the 410 is sent once)", ev.Type, ok)
	}
	again.Stop()
	if err := c.Get().AbsPath("/api/v1/namespaces/dst/configmaps").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	if got := p.listed(); got != 2 {
		t.Errorf("listed = %d; want 2 (the watch sending the initial events and the LIST)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Errorf("upstream saw %q; want 4 requests (not the one the proxy answered)", seen)
	}
}
