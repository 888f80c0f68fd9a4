package informer

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// apiHealth watches the pipeline's HTTP requests to the apiserver, below
// client-go's own retries: rest.Request retries a watch that times out
// (a TLS handshake to an unreachable apiserver, say) ten times and then
// returns an empty watch and no error, so during a network partition
// neither the reflector nor sharedWatch.call sees a failure for about two
// minutes. Every round trip does pass through here: one that fails
// without a response starts (or continues) a run of failures, one that
// gets any response ends it.
type apiHealth struct {
	log      *slog.Logger
	logEvery time.Duration

	mu  sync.Mutex
	run failureRun // guarded by mu
}

// HTTP/2 health check of the connections to the apiserver. client-go's
// defaults (HTTP2_READ_IDLE_TIMEOUT_SECONDS=30, HTTP2_PING_TIMEOUT_SECONDS=15)
// notice a connection the network dropped without a reset only after 45s,
// and until then every request multiplexed on it hangs. A ping after 5s
// without a frame, answered within 5s, notices it within 10s, for one
// PING frame per quiet 5s per connection.
const (
	h2SendPingTimeout = 5 * time.Second
	h2PingTimeout     = 5 * time.Second
)

// instrument makes cfg's requests go through h, and gives cfg's clients a
// transport of their own with the shorter HTTP/2 health check.
//
// A transport of their own: client-go shares one transport between every
// client with the same TLS settings, and hands WrapTransport a wrapper of
// it, not the *http.Transport; a config with a Proxy is not shared, so
// WrapTransport gets the *http.Transport itself, freshly built and used by
// no one yet, and may set its HTTP2 options. ProxyFromEnvironment is what
// client-go uses when Proxy is nil, so nothing else changes.
func (h *apiHealth) instrument(cfg *rest.Config) {
	if cfg.Proxy == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if t, ok := rt.(*http.Transport); ok && t.HTTP2 == nil {
			t.HTTP2 = &http.HTTP2Config{SendPingTimeout: h2SendPingTimeout, PingTimeout: h2PingTimeout}
		}
		if wrap != nil {
			rt = wrap(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			switch {
			case err == nil:
				h.answered()
			case req.Context().Err() == nil: // not a request given up by its caller
				h.unanswered(time.Now(), req.URL.Path, err)
			}
			return resp, err
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (h *apiHealth) answered() {
	h.mu.Lock()
	ended := h.run.end()
	h.mu.Unlock()
	if ended.failures > 0 {
		h.log.Info("apiserver answers again", "unreachableFor", time.Since(ended.since).Round(time.Millisecond), "failedRequests", ended.failures)
	}
}

// apiStaleAfter ends a run of failed requests that no failure has
// continued for this long, though no request has succeeded either: a
// single failed request (a reset connection that client-go then retried
// on another) must not mark the apiserver unreachable until some request
// happens to finish, which for healthy watch streams can take minutes.
// During an outage client-go fails a request at least every ~11s (a TLS
// handshake timeout and a 1s retry), sharedWatch.call every 2s; a blip
// client-go retries ends with the retry's success a second later.
const apiStaleAfter = 15 * time.Second

// expireLocked ends a run no failure has continued for apiStaleAfter.
func (h *apiHealth) expireLocked(now time.Time) {
	if h.run.failures > 0 && now.Sub(h.run.last) > apiStaleAfter {
		h.run = failureRun{}
	}
}

func (h *apiHealth) unanswered(now time.Time, path string, err error) {
	h.mu.Lock()
	h.expireLocked(now)
	logIt := h.run.fail(now, err, h.logEvery)
	run := h.run
	h.mu.Unlock()
	if logIt {
		h.log.Warn("apiserver unreachable; client-go retries", "path", path,
			"unreachableFor", now.Sub(run.since).Round(time.Millisecond), "failedRequests", run.failures, "err", err)
	}
}

// state returns the current run of failures; zero values outside one.
func (h *apiHealth) state(now time.Time) (error, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expireLocked(now)
	return h.run.lastErr, h.run.since
}

// failureRun is a run of failures: from the first failure after a success
// to the next success; the zero value is no run. Its owner's mutex guards
// it.
type failureRun struct {
	since      time.Time // the first failure
	last       time.Time // the latest failure
	lastErr    error
	failures   int
	lastLogged time.Time
}

// fail records a failure at now, and says whether to log it: the first of
// the run, then one per logEvery.
func (r *failureRun) fail(now time.Time, err error, logEvery time.Duration) bool {
	if r.failures == 0 {
		r.since = now
	}
	r.failures++
	r.last, r.lastErr = now, err
	if r.failures == 1 || now.Sub(r.lastLogged) >= logEvery {
		r.lastLogged = now
		return true
	}
	return false
}

// end ends the run and returns it as it was.
func (r *failureRun) end() failureRun {
	ended := *r
	*r = failureRun{}
	return ended
}
