package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/testenv"
)

func startServer(t *testing.T, o server.Options) string {
	t.Helper()
	o.Address = "127.0.0.1:0"
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s.Addr().String()
}

// stalled opens n connections that each do what setup says and then
// nothing, and counts those the server closes.
func stalled(t *testing.T, addr string, n int, setup func(net.Conn) error) *atomic.Int64 {
	t.Helper()
	var closed atomic.Int64
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if err := setup(c); err != nil {
			t.Fatal(err)
		}
		go func() {
			// Whatever the server sends (a response, a 408), then EOF or
			// a reset when it closes the connection.
			_, _ = io.Copy(io.Discard, c)
			closed.Add(1)
		}()
	}
	return &closed
}

func write(s string) func(net.Conn) error {
	return func(c net.Conn) error { _, err := io.WriteString(c, s); return err }
}

// Connections that stall, before a request or between requests, are
// closed by the server's timeouts rather than held for ever.
func TestTimeoutsCloseStalledConnections(t *testing.T) {
	tests := []struct {
		name  string
		setup func(net.Conn) error
	}{
		{"connects and sends nothing", func(net.Conn) error { return nil }},
		{"slowloris: a header that never ends", write("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")},
		{"keep-alive, idle after one request", func(c net.Conn) error {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServer(t, server.Options{ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
			const n = 50
			closed := stalled(t, addr, n, tc.setup)
			testenv.Eventually(t, "the server to close every stalled connection", func() bool { return closed.Load() == n })
		})
	}
}

// A flood of idle and slowloris connections, many more than the limit, is
// held to the limit, and /healthz and /readyz keep answering meanwhile.
// The timeouts are far off here: only the limit acts.
func TestConnectionFloodKeepsProbesAnswering(t *testing.T) {
	const limit, flood = 16, 300
	addr := startServer(t, server.Options{MaxConnections: limit, ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour})
	idle := stalled(t, addr, flood/2, func(net.Conn) error { return nil })
	slow := stalled(t, addr, flood/2, write("GET /metrics HTTP/1.1\r\nHost: x\r\n"))
	testenv.Eventually(t, "the flood to be held to the limit", func() bool {
		return idle.Load()+slow.Load() >= flood-limit
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 20 {
		// More flood between probes: each probe still gets in.
		stalled(t, addr, limit, func(net.Conn) error { return nil })
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := client.Get("http://" + addr + path)
			if err != nil {
				t.Fatalf("probe %d %s under a flood: %v", i, path, err)
			}
			_ = resp.Body.Close()
			if path == "/healthz" && resp.StatusCode != http.StatusOK {
				t.Errorf("probe %d %s: %s", i, path, resp.Status)
			}
		}
	}
}
