package registrytest

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// Hostile servers' behaviours, for tests of bounds: Drip ends when the
// client goes away or stop is closed, Hang only when stop is closed
// (close it before the server's Close, which waits for its handlers).

// Hang answers nothing until stop is closed, whatever the request's
// context says: a handler that returned when its context ended early (a
// rehearsal under -race saw one end before the client's own 200ms bound)
// sent an empty 200, so the client read an answer from a server that was
// meant to hang. The connection stays open for the client's bound to end.
func Hang(_ *http.Request, stop <-chan struct{}) {
	<-stop
}

// Drip sends the headers set on w at once, then the body one byte every
// 20ms, as a server behind a choked link.
func Drip(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
	w.WriteHeader(http.StatusOK)
	for {
		if _, err := w.Write([]byte("{")); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond): // the drip's pace
		}
	}
}

// SilentPort listens on loopback, accepts TCP connections and never
// reads or writes a byte; it is host:port, closed when t ends.
func SilentPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}
