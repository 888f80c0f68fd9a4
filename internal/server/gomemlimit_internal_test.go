package server

import (
	"context"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// README points at go_gc_gomemlimit_bytes for the soft limit in force
// now (the daemon sets it again as plugins come and go): /metrics reports
// the runtime's current limit, read at the scrape, not the start's.
func TestMetricsReportTheSoftLimitInForce(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	s, err := Start(context.Background(), Options{Address: "127.0.0.1:0", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "go_gc_gomemlimit_bytes "); ok {
				return v
			}
		}
		t.Fatal("/metrics has no go_gc_gomemlimit_bytes")
		return ""
	}
	for _, limit := range []int64{900 << 20, 700 << 20} {
		debug.SetMemoryLimit(limit)
		got, err := strconv.ParseFloat(scrape(), 64)
		if err != nil || int64(got) != limit {
			t.Errorf("go_gc_gomemlimit_bytes = %v (%v), want %d", got, err, limit)
		}
	}
}
