package informer

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The pipeline's clients ask for uncompressed responses, so that the
// apiserver does not gzip a watch-list stream event by event (restConfig).
func TestPipelineRequestsNoGzip(t *testing.T) {
	encodings := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case encodings <- r.Header.Get("Accept-Encoding"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[]}`)
	}))
	defer srv.Close()
	api := &apiHealth{log: slog.New(slog.DiscardHandler)}
	cfg := api.restConfig(&rest.Config{Host: srv.URL})
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if _, err := d.Resource(gvr).Namespace("ns").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := <-encodings; got != "" {
		t.Fatalf("Accept-Encoding %q, want none (no gzip)", got)
	}

	// And the same client without it does ask for gzip: the check above
	// can fail.
	plain := rest.CopyConfig(&rest.Config{Host: srv.URL})
	api.instrument(plain)
	d, err = dynamic.NewForConfig(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Resource(gvr).Namespace("ns").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := <-encodings; got != "gzip" {
		t.Fatalf("without restConfig: Accept-Encoding %q, want gzip (the transport's default)", got)
	}
}
