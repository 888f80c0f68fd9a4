package testenv

import (
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
)

// StalledGet sends a GET of path to addr on a connection with a small
// receive buffer, reads the status line and stops reading: a client that
// requests and never reads the body. It returns the connection (closed
// when the test ends) and the status code, e.g. "200".
func StalledGet(t testing.TB, addr, path string) (net.Conn, string) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: informer-host\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("HTTP/1.1 200"))
	if _, err := io.ReadFull(c, line); err != nil {
		t.Fatal(err)
	}
	return c, strings.TrimPrefix(string(line), "HTTP/1.1 ")
}
