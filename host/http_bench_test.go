package host

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/upstream"
)

// BenchmarkHTTPUpstream is the cost of a plugin's HTTP call through a
// named upstream (ABI.md §17.3) to a loopback server, next to the same
// request made with net/http directly, in the same run. Sub-benchmarks:
//
//	plugin    ih_handle doing http_request (POST, 64-byte JSON body) and
//	          http_response_read of the body, through the host's upstream
//	upstream  the same request through upstream.Client.Do, no plugin
//	net-http  the same request with an http.Client: NewRequest under the
//	          same timeout, Do, a bounded io.ReadAll of the body
//	noop      an ih_handle that does nothing (cachebench "n"): the wasm
//	          call's own cost
//
// Each reports ns/op and cpu-ns/op (the process's CPU time, the loopback
// server's included, per call). The target is plugin ≤ 1.1 × net-http
// (≤ 10% overhead) in cpu-ns/op: on a shared machine wall time per
// request is mostly the wait for a core.
func BenchmarkHTTPUpstream(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	cfg, err := config.Parse("config.yaml", []byte(`
apiVersion: informer-host/v1
resources: [{name: pods, version: v1, resource: pods}]
upstreams: [{name: u, url: "`+srv.URL+`"}]
plugins:
  default:
    grants: {http: {upstreams: [u]}}
`))
	if err != nil {
		b.Fatal(err)
	}
	set, err := upstream.New(cfg, upstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	client := set.Client("x.wasm", cfg.SettingsFor("x.wasm").Grants.HTTP)
	ctx := context.Background()
	eng, err := engine.New(ctx, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close(ctx)
	body := []byte(`{"namespace":"default","pod":"web-000","reason":"CrashLoopBack"}`)
	ev := engine.NewEnvelope(&event.Event{Type: event.EventAdd, Resource: &event.ResourceRef{Name: "pods"}})

	handle := func(b *testing.B, wasm []byte, o engine.InstanceOptions) {
		mod, err := eng.Load(ctx, "x.wasm", wasm, engine.Limits{MemoryPages: 16, CallTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		defer mod.Close(ctx)
		inst, err := mod.Instantiate(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		defer inst.Close(ctx)
		handleN(b, inst, ev)
	}
	b.Run("noop", func(b *testing.B) {
		handle(b, testPlugin(b, "cachebench"), engine.InstanceOptions{Config: []byte(`"n"`)})
	})
	b.Run("plugin", func(b *testing.B) {
		handle(b, testPlugin(b, "httpbench"), engine.InstanceOptions{HTTP: upstreamClient{client}})
	})
	b.Run("upstream", func(b *testing.B) {
		var resp upstream.Response
		req := upstream.Request{Upstream: "u", Method: "POST", Path: "/hook", Header: []byte("Content-Type: application/json"), Body: body}
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for range b.N {
			if code, msg := client.Do(ctx, &req, &resp); code != 200 {
				b.Fatal(code, msg)
			}
		}
	})
	b.Run("net-http", func(b *testing.B) {
		hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for range b.N {
			// What a careful native caller does too: a timeout and a
			// bounded read of the body.
			tctx, cancel := context.WithTimeout(ctx, config.DefaultUpstreamTimeout)
			req, err := http.NewRequestWithContext(tctx, "POST", srv.URL+"/hook", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			r, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(io.LimitReader(r.Body, int64(config.DefaultUpstreamMaxResponseBytes)+1)); err != nil || r.StatusCode != 200 {
				b.Fatal(r.StatusCode, err)
			}
			r.Body.Close()
			cancel()
		}
	})
}

// handleN delivers ev to inst b.N times, each handled OK, timed, with
// the process's CPU time per call (cpu-ns/op).
func handleN(b *testing.B, inst *engine.Instance, ev *engine.Envelope) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	defer cpuPerOp(b)()
	for range b.N {
		r, err := inst.Handle(context.Background(), ev)
		if err != nil || r.Code != engine.CodeOK {
			b.Fatalf("%v %v", r, err)
		}
	}
}

// cpuPerOp starts counting the process's CPU time; the function it
// returns reports it per op as cpu-ns/op. On a loaded machine wall time
// per request is mostly waiting for a core; CPU time is the work.
func cpuPerOp(b *testing.B) func() {
	cpu := benchenv.CPU()
	return func() { b.ReportMetric(float64((benchenv.CPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}
