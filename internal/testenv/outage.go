package testenv

import (
	"errors"
	"net"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// OutageProxy is a TCP proxy on loopback in front of the apiserver that a
// test takes down and brings back, as if the apiserver were killed and
// restarted: Down resets every open connection and refuses new ones (the
// port is closed), Up listens on the same port again. Partition instead
// stops forwarding while connections stay open and new ones are accepted,
// as when the network to the apiserver's node is lost: nothing is reset,
// so only timeouts and health checks notice. It forwards bytes only, so
// TLS and authentication are the apiserver's own.
type OutageProxy struct {
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener          // nil while down
	conns map[net.Conn]struct{} // both sides of every proxied connection
	// healed is non-nil during a partition and closed when it ends.
	healed chan struct{}
	wg     sync.WaitGroup
}

// NewOutageProxy starts a proxy to the apiserver cfg reaches and returns
// a copy of cfg that goes through it.
func NewOutageProxy(t testing.TB, cfg *rest.Config) (*OutageProxy, *rest.Config) {
	t.Helper()
	host, err := targetAddr(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &OutageProxy{target: host, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.heal()
		p.Down()
		p.wg.Wait()
	})
	out := rest.CopyConfig(cfg)
	out.Host = "https://" + p.addr
	return p, out
}

func targetAddr(cfg *rest.Config) (string, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return "", errors.New("testenv: apiserver URL without a port: " + cfg.Host)
	}
	return u.Host, nil
}

// Down closes the port and resets every connection through it.
func (p *OutageProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, as the kernel sends for a killed process's half-read socket
		}
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Partition stops forwarding bytes in both directions until Up; what was
// sent meanwhile is delivered then, as TCP retransmits after a partition.
func (p *OutageProxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		p.healed = make(chan struct{})
	}
}

func (p *OutageProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
}

// Up ends a partition, and listens on the proxy's port again after Down.
func (p *OutageProxy) Up(t testing.TB) {
	t.Helper()
	p.heal()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("testenv: listen on %s again: %v", p.addr, err)
	}
	p.serveLocked(ln)
}

func (p *OutageProxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *OutageProxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(ln, c)
			}()
		}
	}()
}

// pipe forwards c to the apiserver until either side closes or Down.
func (p *OutageProxy) pipe(ln net.Listener, c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // went down meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	forward := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				healed := p.healed
				p.mu.Unlock()
				if healed != nil {
					<-healed
				}
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go forward(up, c)
	go forward(c, up)
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
	_ = c.Close()
	_ = up.Close()
	<-done
}
