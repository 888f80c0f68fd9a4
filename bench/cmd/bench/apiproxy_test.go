package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

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
	p, err := newAPIProxy(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pemCert(upstream.Certificate().Raw)}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.writeKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate.UserName = "plugin"
	c, err := rest.UnversionedRESTClientFor(withJSON(cfg))
	if err != nil {
		t.Fatal(err)
	}
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

func withJSON(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = nil
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}
