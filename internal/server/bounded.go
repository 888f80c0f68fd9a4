package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// bounded serves an endpoint whose response is built from the daemon's
// state (/metrics, /debug/plugins) so that its clients cannot take the
// daemon's memory: at most max requests at once, each response rendered
// whole into a buffer of at most limit() bytes and then written within
// timeout. Past max, a request gets 503 at once.
//
// Why render first and then write, rather than stream: a streaming
// encoder holds everything it encodes from (promhttp's gathered metric
// families) for as long as the client takes to read, and a client that
// never reads holds it until the write timeout; with the slots bounded
// and the buffer bounded, what slow clients hold is at most max × limit.
type bounded struct {
	name    string
	log     *slog.Logger
	timeout time.Duration
	limit   func() int64
	render  http.Handler // writes the response into a bufferedResponse
	// slots holds a token per request being served, rendering or
	// writing; its capacity is the concurrency bound.
	slots chan struct{}
	// busy and tooLarge count the requests refused for each reason.
	busy, tooLarge prometheus.Counter
}

// newRefused is the counter of what bounded refuses, by endpoint and
// reason.
func newRefused() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "informer_host_server_requests_refused_total",
		Help: "Requests of /metrics or /debug/plugins refused: busy (every slot taken, 503) or too_large (the response past its bound, 500).",
	}, []string{"endpoint", "reason"})
}

func newBounded(name string, log *slog.Logger, max int, timeout time.Duration, limit func() int64, render http.Handler,
	refused *prometheus.CounterVec) *bounded {
	return &bounded{name: name, log: log, timeout: timeout, limit: limit, render: render, slots: make(chan struct{}, max),
		busy: refused.WithLabelValues(name, "busy"), tooLarge: refused.WithLabelValues(name, "too_large")}
}

func (b *bounded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
	default:
		b.busy.Inc()
		// Close the connection too: a flood of clients that never read
		// should not keep its connections.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("%s: %d requests are being served, the most at once; retry later", b.name, cap(b.slots)),
			http.StatusServiceUnavailable)
		return
	}
	// The deadline covers rendering too: a client is owed nothing once it
	// has passed. Only HTTP/1 and HTTP/2 connections support it; the
	// server's WriteTimeout still applies where they do not.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(b.timeout))
	limit := b.limit()
	buf := &bufferedResponse{header: http.Header{}, limit: limit}
	b.render.ServeHTTP(buf, r)
	if buf.overflow {
		b.tooLarge.Inc()
		b.log.Error("response too large; not sent", "endpoint", b.name, "limitBytes", limit)
		http.Error(w, fmt.Sprintf("%s: the response is larger than %d bytes", b.name, limit), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	for k, vs := range buf.header {
		h[k] = vs
	}
	h.Set("Content-Length", strconv.Itoa(buf.body.Len()))
	w.WriteHeader(buf.status())
	_, _ = w.Write(buf.body.Bytes())
}

// errTooLarge is what bufferedResponse.Write returns past its limit.
var errTooLarge = errors.New("response too large")

// bufferedResponse is an http.ResponseWriter that keeps the response in
// memory, up to limit bytes of body.
type bufferedResponse struct {
	header   http.Header
	code     int
	body     bytes.Buffer
	limit    int64
	overflow bool
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.overflow || int64(b.body.Len())+int64(len(p)) > b.limit {
		b.overflow = true
		return 0, errTooLarge
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}
