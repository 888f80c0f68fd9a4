package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiProxy stands between one side's process and the apiserver and
// counts every HTTP request the process sends: the count is exact (each
// request, discovery and watches included, whatever library made it),
// and fair (the same counter for a side in any language, with no code of
// the harness's inside it). The apiserver's own apiserver_request_total
// cannot tell a side's requests from the harness's writes of the
// workload, which run at the same time. The proxy speaks TLS and HTTP/2
// as the apiserver does and forwards with the harness's credentials
// (impersonation headers pass through); its CPU is the harness's, no
// side's.
type apiProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	n    requestClasses
	last time.Time // when the last request came
	// watches cancels each watch in flight, for cut.
	watches map[int]context.CancelFunc
	nextID  int
	// listsOf names the resource whose lists (a LIST, or a watch that
	// sends the initial events) lists counts; "" counts none.
	listsOf string
	lists   int
	// expire, when set, answers the next watch that resumes from a
	// resourceVersion with the 410 the apiserver sends for a compacted
	// one (relist.go).
	expire bool
}

// requestClasses counts requests by what they do to the apiserver.
type requestClasses struct {
	Reads   int `json:"reads"`   // GET: get, list, discovery
	Watches int `json:"watches"` // GET with watch=true
	Writes  int `json:"writes"`  // POST, PUT, PATCH (apply among them), DELETE
	Other   int `json:"other"`
}

func (c requestClasses) total() int { return c.Reads + c.Watches + c.Writes + c.Other }

func (c requestClasses) minus(d requestClasses) requestClasses {
	return requestClasses{c.Reads - d.Reads, c.Watches - d.Watches, c.Writes - d.Writes, c.Other - d.Other}
}

// classify adds r to c.
func (c *requestClasses) classify(r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if isWatch(r) {
			c.Watches++
		} else {
			c.Reads++
		}
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		c.Writes++
	default:
		c.Other++
	}
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return r.Method == http.MethodGet && (w == "true" || w == "1")
}

func newAPIProxy(cfg *rest.Config) (*apiProxy, error) {
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver address %q: %w", cfg.Host, err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(upstream) },
		Transport: rt,
		// A watch is a stream: every event goes on at once.
		FlushInterval: -1,
		// A side stopped mid-request cancels it; that is no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p := &apiProxy{watches: map[int]context.CancelFunc{}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.n.classify(r)
		p.last = time.Now()
		if p.listsOf != "" && startsList(r, p.listsOf) {
			p.lists++
		}
		watching := isWatch(r)
		expire := watching && p.expire && r.URL.Query().Get("sendInitialEvents") != "true"
		if expire {
			p.expire = false
		}
		id := p.nextID
		if watching {
			ctx, cancel := context.WithCancel(r.Context())
			r = r.WithContext(ctx)
			p.nextID++
			p.watches[id] = cancel
		}
		p.mu.Unlock()
		if watching {
			defer func() {
				p.mu.Lock()
				cancel, live := p.watches[id]
				if live {
					cancel()
					delete(p.watches, id)
				}
				p.mu.Unlock()
				// The proxy aborts a response whose upstream ended
				// mid-body, which the client takes for an error of the
				// stream; a watch that cut ended ends cleanly instead,
				// as the apiserver ends one, so that the reflector
				// resumes from its resourceVersion.
				if v := recover(); v != nil && (v != http.ErrAbortHandler || live) {
					panic(v)
				}
			}()
		}
		if expire {
			writeExpired(w, r.URL.Query().Get("resourceVersion"))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	return p, nil
}

// counts returns the requests counted so far.
func (p *apiProxy) counts() requestClasses {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// countLists starts counting the lists of resource (startsList).
func (p *apiProxy) countLists(resource string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listsOf = resource
}

// listed returns the lists of countLists's resource counted so far.
func (p *apiProxy) listed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lists
}

// cut ends every watch in flight, as a dropped connection or an
// apiserver's restart does, and returns how many it ended; with expire
// the next watch that resumes from a resourceVersion gets a 410.
func (p *apiProxy) cut(expire bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire = expire
	n := len(p.watches)
	for id, cancel := range p.watches {
		cancel()
		delete(p.watches, id)
	}
	return n
}

// quiet waits until no request has come for d, and gives up after limit:
// a controller's work caused by the last change (a reconcile of the key
// its own write enqueued) is then done, and counted.
func (p *apiProxy) quiet(d, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		p.mu.Lock()
		since := time.Since(p.last)
		p.mu.Unlock()
		if since >= d {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the side still sent requests to the apiserver %v after it converged (none for %v expected)", limit, d)
		}
		time.Sleep(d - since)
	}
}

// writeKubeconfig writes a kubeconfig that reaches the apiserver through
// the proxy.
func (p *apiProxy) writeKubeconfig(path string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["bench"] = &clientcmdapi.Cluster{Server: p.srv.URL,
		CertificateAuthorityData: pemCert(p.srv.Certificate().Raw)}
	c.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	c.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	c.CurrentContext = "bench"
	return clientcmd.WriteToFile(*c, path)
}

func (p *apiProxy) close() { p.srv.Close() }

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
