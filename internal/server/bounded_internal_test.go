package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/pluginmetrics"
	"github.com/informer-host/informer-host/internal/testenv"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// Past its slots, a request is refused at once with 503, Retry-After and
// the connection closed; a freed slot serves again.
func TestBoundedSlots(t *testing.T) {
	const slots = 3
	release := make(chan struct{})
	b := newBounded("/x", discard, slots, time.Hour, func() int64 { return 1 << 10 },
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			<-release
			_, _ = io.WriteString(w, "ok")
		}), newRefused())
	var wg sync.WaitGroup
	codes := make(chan int, slots)
	for range slots {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			b.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			codes <- rec.Code
		})
	}
	testenv.Eventually(t, "every slot taken", func() bool { return len(b.slots) == slots })
	rec := httptest.NewRecorder()
	b.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || rec.Header().Get("Connection") != "close" {
		t.Errorf("past the slots: %d %v", rec.Code, rec.Header())
	}
	if n := testutil.ToFloat64(b.busy); n != 1 {
		t.Errorf("busy refusals counted: %g, want 1", n)
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a request in a slot got %d", c)
		}
	}
	rec = httptest.NewRecorder()
	b.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok" || rec.Header().Get("Content-Length") != "2" {
		t.Errorf("after release: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
}

// A response is sent whole with its length up to the limit, and not at all
// past it.
func TestBoundedLimit(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name   string
		writes []int
		want   int
	}{
		{"empty", nil, http.StatusOK},
		{"at the limit", []int{400, 600}, http.StatusOK},
		{"one byte past it", []int{400, 601}, http.StatusInternalServerError},
		{"past it, then more", []int{1001, 1}, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBounded("/x", discard, 1, time.Hour, func() int64 { return limit },
				http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/plain")
					w.WriteHeader(http.StatusAccepted)
					for _, n := range tc.writes {
						_, _ = w.Write([]byte(strings.Repeat("x", n)))
					}
				}), newRefused())
			rec := httptest.NewRecorder()
			b.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			got := rec.Code
			if got == http.StatusAccepted {
				got = http.StatusOK // the handler's own status, passed on
			}
			if got != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			want := 0.0
			if tc.want == http.StatusInternalServerError {
				want = 1
			}
			if n := testutil.ToFloat64(b.tooLarge); n != want {
				t.Errorf("too-large refusals counted: %g, want %g", n, want)
			}
			if tc.want == http.StatusOK {
				total := 0
				for _, n := range tc.writes {
					total += n
				}
				if rec.Body.Len() != total || rec.Header().Get("Content-Length") != fmt.Sprint(total) || rec.Header().Get("Content-Type") != "text/plain" {
					t.Errorf("body %d bytes, headers %v", rec.Body.Len(), rec.Header())
				}
			}
		})
	}
}

// bigMetrics registers plugin metrics that make /metrics about n bytes.
func bigMetrics(t testing.TB, s *Server, n int64) {
	t.Helper()
	r := pluginmetrics.New(pluginmetrics.Options{})
	v := r.PluginLimits("big.wasm", pluginmetrics.Limits{MaxSeries: 100000, MaxBytes: n}).Instance()
	id := v.Declare(abi.MetricGauge, []byte(`{"name":"big","labels":["a"]}`))
	pad := strings.Repeat("v", pluginmetrics.MaxLabelValueLen-8)
	for i := 0; ; i++ {
		if v.Set(id, 1, []byte(fmt.Sprintf("%08d%s", i, pad))) != 0 {
			break
		}
	}
	s.reg.MustRegister(r)
}

// A client that never reads a scrape holds its slot only until the scrape
// timeout, not the server's write timeout.
func TestScrapeTimeoutFreesTheSlot(t *testing.T) {
	s, err := Start(context.Background(), Options{Address: "127.0.0.1:0", Logger: discard,
		MaxConcurrentScrapes: 1, ScrapeTimeout: 5 * time.Second, WriteTimeout: time.Hour, MaxMetricsBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	bigMetrics(t, s, 3<<20) // past what the sockets take (ConnWriteBuffer)
	addr := s.Addr().String()
	if _, status := testenv.StalledGet(t, addr, "/metrics"); status != "200" {
		t.Fatalf("stalled scrape: %s", status)
	}
	testenv.Eventually(t, "a scrape served while the stalled one is not read", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false // cut off by the timeout itself on a slow machine
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK && err == nil
	})
}
