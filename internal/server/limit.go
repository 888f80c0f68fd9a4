package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// shedListener bounds the connections the server holds open. At the
// limit, a new connection makes room by closing the open connection that
// has waited longest without a request being served: one that has not sent
// a complete request header yet, or a keep-alive connection between
// requests. Only when every open connection is in a handler is the new
// one refused (closed at once).
//
// Why shed rather than queue (golang.org/x/net/netutil.LimitListener
// blocks Accept at the limit): a flood of idle or slowloris connections
// would then hold every slot until its timeouts, and a liveness probe
// waits in the accept queue behind it, fails, and the kubelet restarts a
// healthy pod. Shedding the oldest waiting connection lets the probe's
// connection in; it sends its request at once and is in a handler, so
// not shed, long before the flood has cycled through the limit. A
// connection is "serving" only while a handler runs: net/http calls a
// connection active from the first byte of a request, which a slowloris
// client sends.
type shedListener struct {
	net.Listener
	max int
	// sndbuf, when > 0, is each connection's kernel send buffer (see
	// Options.ConnWriteBuffer).
	sndbuf int

	// mu guards conns and every trackedConn's serving and since.
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	l         *shedListener
	closeOnce sync.Once
	// serving counts the handlers running on this connection: one at a
	// time with HTTP/1.1, any number with HTTP/2 (TLS only). Guarded by
	// l.mu.
	serving int
	// since is when the connection was accepted or its last request was
	// served: how long it has been waiting. Guarded by l.mu.
	since time.Time
}

func newShedListener(ln net.Listener, max, sndbuf int) *shedListener {
	return &shedListener{Listener: ln, max: max, sndbuf: sndbuf, conns: map[*trackedConn]struct{}{}}
}

func (l *shedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if t, ok := c.(*net.TCPConn); ok && l.sndbuf > 0 {
			_ = t.SetWriteBuffer(l.sndbuf) // best effort: the default only costs memory
		}
		tc := &trackedConn{Conn: c, l: l, since: time.Now()}
		l.mu.Lock()
		var shed *trackedConn
		if len(l.conns) >= l.max {
			for o := range l.conns {
				if o.serving == 0 && (shed == nil || o.since.Before(shed.since)) {
					shed = o
				}
			}
			if shed == nil { // all serving: no room
				l.mu.Unlock()
				_ = c.Close()
				continue
			}
			delete(l.conns, shed)
		}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		if shed != nil {
			_ = shed.Close()
		}
		return tc, nil
	}
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return err
}

type connKey struct{}

// connContext is http.Server.ConnContext: it makes the connection known
// to serving.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// serving marks the request's connection as serving while h runs.
func serving(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tc, _ := r.Context().Value(connKey{}).(*trackedConn)
		if tc == nil {
			h.ServeHTTP(w, r)
			return
		}
		l := tc.l
		l.mu.Lock()
		tc.serving++
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			tc.serving--
			tc.since = time.Now()
			l.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}
