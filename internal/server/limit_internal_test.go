package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/testenv"
)

// At the limit, a connection whose request is in a handler is never shed:
// a new connection is refused instead, and the requests in progress
// complete.
func TestShedNeverClosesServingConnections(t *testing.T) {
	const limit = 4
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var inHandler atomic.Int64
	srv := &http.Server{
		Handler: serving(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			inHandler.Add(1)
			<-release
			_, _ = io.WriteString(w, "done")
		})),
		ConnContext: connContext,
	}
	go func() { _ = srv.Serve(newShedListener(ln, limit, 0)) }()
	t.Cleanup(func() { _ = srv.Close() })

	var busy []net.Conn
	for range limit {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
	}
	testenv.Eventually(t, "every request to be in its handler", func() bool { return inHandler.Load() == limit })

	extra, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	// The deadline only turns a hang into a failure; it bounds nothing.
	_ = extra.SetReadDeadline(time.Now().Add(testenv.EventuallyTimeout))
	var ne net.Error
	if n, err := extra.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection past the limit: %d bytes, %v; want it closed", n, err)
	}

	close(release)
	for i, c := range busy {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("request %d in its handler at the limit: %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("request %d: %s", i, resp.Status)
		}
	}
}

// Accepted connections keep the configured kernel send buffer while a
// client does not read: without it Linux grows the buffer (to 4 MiB by
// default) and queues that much for the client, in the pod's memory.
func TestConnWriteBuffer(t *testing.T) {
	const sndbuf = 64 << 10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := newShedListener(ln, 4, sndbuf)
	defer sl.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := sl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Write until the kernel takes no more; the deadline only ends the
	// write, it bounds nothing the test asserts.
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(make([]byte, 64<<20))
	raw, err := c.(*trackedConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		got, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if got > 2*sndbuf { // Linux reports twice what was set
		t.Errorf("SO_SNDBUF = %d after a client that does not read, want at most %d", got, 2*sndbuf)
	}
}
