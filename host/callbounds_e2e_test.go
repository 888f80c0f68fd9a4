package host

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// A handler that retries a failing request inside one call, for ever, is
// stopped by the call bounds config.yaml sets, not left running: the
// total time (limits.maxCallTime, which counts the waits callTimeout does
// not; here against an upstream that never answers, so the call is
// stopped in its wait and the request canceled) or the host call cap
// (limits.maxHostCallsPerCall; here against a refused port). The call is
// a timeout failure naming the limit.
func TestCallBoundsStopARequestLoop(t *testing.T) {
	controlPlane(t) // every case needs it, and the check after them too
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	canceled := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		select {
		case canceled <- struct{}{}:
		default:
		}
	}))
	defer hang.Close()

	for _, tc := range []struct {
		name, url, limits, want, result string
	}{{
		name:   "total time",
		url:    hang.URL,
		limits: "{callTimeout: 1s, maxCallTime: 1500ms}",
		want:   "call exceeded its 1.5s total time limit (limits.maxCallTime",
		result: "canceled",
	}, {
		name:   "host calls",
		url:    refused,
		limits: "{callTimeout: 1h, maxCallTime: 2h, maxHostCallsPerCall: 50}",
		want:   "call made more than 50 host calls (limits.maxHostCallsPerCall)",
		result: "unavailable",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.NewReplacer("URL", tc.url, "LIMITS", tc.limits).Replace(`
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
upstreams:
  - {name: up, url: URL, methods: [GET], timeout: 5m}
plugins:
  directory: DIR
  modules:
    - file: loop.wasm
      bindings: [{resource: cms}]
      delivery: {maxRetries: 0}
      limits: LIMITS
      grants:
        http: {upstreams: [up]}
`)
			hs, err := newHarness(t, cfg, map[string][]byte{"loop.wasm": testPlugin(t, "httploop")})
			if err != nil {
				t.Fatal(err)
			}
			hs.createCM("a", nil)
			var failed observed
			eventually(t, "the call to be stopped", func() bool {
				for _, d := range hs.rec.of("loop.wasm") {
					if d.Key == hs.ns+"/a" && d.Failure != 0 {
						failed = d
						return true
					}
				}
				return false
			})
			if failed.Failure != engine.KindTimeout {
				t.Errorf("%s, want a timeout", failed)
			}
			st := hs.status("loop.wasm")
			if !strings.Contains(st.LastError, tc.want) || st.Counters.Timeouts == 0 {
				t.Errorf("last error %q, counters %+v; want a timeout by %q", st.LastError, st.Counters, tc.want)
			}
			if n := hs.pluginMetric("informer_host_plugin_http_requests_total", map[string]string{"plugin": "loop.wasm", "upstream": "up", "result": tc.result}); n < 1 {
				t.Errorf("requests with result %s: %v, want at least one", tc.result, n)
			}
		})
	}
	select {
	case <-canceled:
	default:
		t.Error("the request the total time stopped was not canceled")
	}
}
