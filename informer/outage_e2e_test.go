package informer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/testenv"
)

// An apiserver outage is visible and short-lived for the pipeline: while
// the apiserver cannot be reached, the failing watch is logged naming its
// resource, and once it has failed for longer than the grace the resource
// is reported (and /readyz answers) not ready; when the apiserver is back,
// an object created then is delivered, and the resource is ready again.
//
// The outages are real at the TCP level (testenv.OutageProxy): a killed
// apiserver resets every connection and refuses new ones; a partition
// resets nothing, so only the HTTP/2 health check and timeouts notice it.
// Each lasts until the grace has run out (10s), long enough for
// client-go's own backoff to have grown. How long the pipeline took to
// notice, and the delay from the apiserver coming back to the delivery,
// are logged, not asserted.
func TestApiserverOutage(t *testing.T) {
	env.Require(t)
	tests := []struct {
		name string
		cut  func(*testenv.OutageProxy)
	}{
		{"killed apiserver", (*testenv.OutageProxy).Down},
		{"network partition", (*testenv.OutageProxy).Partition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { testOutage(t, tc.cut) })
	}
}

func testOutage(t *testing.T, cut func(*testenv.OutageProxy)) {
	ns := env.Namespace(t)
	proxy, cfg := testenv.NewOutageProxy(t, env.Config)
	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	const grace = 10 * time.Second
	p, err := informer.New(informer.Options{RESTConfig: cfg, Logger: log, WatchFailureGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.Apply(context.Background(), []config.Resource{{Name: "cms", Version: "v1", Resource: "configmaps", Namespaces: []string{ns}}}); err != nil {
		t.Fatal(err)
	}
	rec, _ := listen(t, p, "cms")
	if why := server.NotReady(p, nil); len(why) > 0 {
		t.Fatalf("not ready before the outage: %v", why)
	}
	mustCreate(t, configMap(ns, "before", "1", nil))
	eventually(t, "the object created before the outage", func() bool { return len(rec.forKey(ns+"/before")) > 0 })

	cut(proxy)
	lost := time.Now()
	// Logged by the watch's own calls, or, while client-go retries them
	// inside one call, by the transport below them, with the path.
	eventually(t, "the failure to be logged with its resource", func() bool {
		return len(logs.Lines("list/watch failing", "resource=configmaps/v1", "namespace="+ns)) > 0 ||
			len(logs.Lines("apiserver unreachable", "path=/api/v1/namespaces/"+ns+"/configmaps")) > 0
	})
	noticed := time.Since(lost)
	eventually(t, "the resource to be reported not ready after the grace", func() bool {
		for _, why := range server.NotReady(p, nil) {
			if strings.HasPrefix(why, "resource cms: list/watch failing since ") {
				return true
			}
		}
		return false
	})

	proxy.Up(t)
	back := time.Now()
	mustCreate(t, configMap(ns, "after", "1", nil))
	eventually(t, "the object created after the outage to be delivered", func() bool { return len(rec.forKey(ns+"/after")) > 0 })
	t.Logf("failure first logged %v after the connection was lost; an object created when the apiserver came back was delivered %v later",
		noticed.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	eventually(t, "the resource to be ready again", func() bool { return len(server.NotReady(p, nil)) == 0 })
	if len(logs.Lines("list/watch works again", "resource=configmaps/v1", "namespace="+ns))+len(logs.Lines("apiserver answers again")) == 0 {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
	// Rate-limited: one line at the first failure, then one per 10s.
	for _, msg := range []string{"list/watch failing", "apiserver unreachable"} {
		if n, max := len(logs.Lines(msg)), int(time.Since(lost)/(10*time.Second))+1; n > max {
			t.Errorf("%d %q lines for one outage of %v; want the log rate-limited:\n%s", n, msg, time.Since(lost), logs.String())
		}
	}
}
