package kubeevents

import (
	"context"

	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// eventsServer stands in for the apiserver's Events API (the real one
// neither refuses on demand nor shows when a client waited): it stores
// every Event it is sent, and refuses those whose reason is "Refused"
// with a 403 as RBAC does.
type eventsServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reasons []string // of the Events stored, in order
}

func newEventsServer(t *testing.T) *eventsServer {
	s := &eventsServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev map[string]any
		_ = json.Unmarshal(body, &ev)
		w.Header().Set("Content-Type", "application/json")
		if ev["reason"] == "Refused" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
				`"message":"events is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"events\" in the namespace \"ns\""}`)
			return
		}
		s.mu.Lock()
		s.reasons = append(s.reasons, fmt.Sprint(ev["reason"]))
		s.mu.Unlock()
		ev["metadata"].(map[string]any)["resourceVersion"] = "1"
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(ev)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *eventsServer) stored() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reasons...)
}

var configMap = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u1"}}

// An Event the apiserver refuses is one readable log line (plugin,
// object, reason, the apiserver's message), not client-go's dump of the
// Event struct, and every outcome is counted by result.
func TestEventRefusedLoggedAndCounted(t *testing.T) {
	srv := newEventsServer(t)
	var logs, klogs bytes.Buffer
	var mu sync.Mutex
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &klogs}, nil)))
	defer klog.ClearLogger()
	rs := New(Options{RESTConfig: &rest.Config{Host: srv.srv.URL}, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	defer rs.Close()
	rec, err := rs.For("p.wasm", config.Grants{Events: &config.EventsGrant{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"Fine", "Refused"} {
		if code, msg := rec.Record(context.Background(), configMap, "Warning", reason, "m"); code != 0 {
			t.Fatalf("%s: %d %s", reason, code, msg)
		}
	}
	if code, _ := rec.Record(context.Background(), configMap, "Warning", "Bad reason", "m"); code == 0 {
		t.Fatal("a reason with a space was queued")
	}
	testenv.Eventually(t, "both Events to be sent", func() bool {
		return testutil.ToFloat64(rs.metrics.WithLabelValues("p.wasm", "sent")) == 1 &&
			testutil.ToFloat64(rs.metrics.WithLabelValues("p.wasm", "refused")) == 1
	})
	if n := testutil.ToFloat64(rs.metrics.WithLabelValues("p.wasm", "invalid")); n != 1 {
		t.Errorf("invalid: %g, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one log line, got:\n%s", logs.String())
	}
	for _, want := range []string{`msg="Event not recorded: the apiserver refused it"`, "plugin=p.wasm", `object="ConfigMap ns/c"`,
		"reason=Refused", `cannot create resource \"events\"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the log line lacks %s:\n%s", want, lines[0])
		}
	}
	if strings.Contains(klogs.String(), "Server rejected event") {
		t.Errorf("client-go logged the refusal itself, with the Event's struct:\n%s", klogs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A plugin's Events are sent under a budget of its own at its writes
// grant's rate, not the daemon's client limit: past the burst the next
// Event waits in the background for its token (it is neither sent
// early nor dropped), and another plugin's budget is another bucket.
func TestEventsBudgetPerPlugin(t *testing.T) {
	srv := newEventsServer(t)
	daemon := &testenv.CountingLimiter{}
	rs := New(Options{RESTConfig: &rest.Config{Host: srv.srv.URL, RateLimiter: daemon}})
	defer rs.Close()
	slow := config.Grants{Events: &config.EventsGrant{}, Writes: &config.WritesGrant{QPS: 0.001, Burst: 2}}
	a, err := rs.For("a.wasm", slow)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rs.For("b.wasm", config.Grants{Events: &config.EventsGrant{}})
	if err != nil {
		t.Fatal(err)
	}
	if a.budget == nil || a.budget == b.budget || a.budget.QPS() != float32(0.001) {
		t.Fatalf("budgets %v and %v; want one each, a's at its grant's rate", a.budget, b.budget)
	}
	for _, reason := range []string{"First", "Second", "Third"} {
		if code, msg := a.Record(context.Background(), configMap, "Normal", reason, "m"); code != 0 {
			t.Fatalf("%s: %d %s", reason, code, msg)
		}
	}
	// The third holds a reservation (the bucket goes below zero) while
	// it waits its 1000 s.
	testenv.Eventually(t, "two Events sent and the third waiting for its token", func() bool {
		return len(srv.stored()) == 2 && a.budget.Tokens() < -0.5
	})
	if got := srv.stored(); strings.Join(got, ",") != "First,Second" {
		t.Fatalf("stored %q, want the burst only", got)
	}
	if code, _ := b.Record(context.Background(), configMap, "Normal", "Other", "m"); code != 0 {
		t.Fatal(code)
	}
	testenv.Eventually(t, "the other plugin's Event, not held up by the first's budget", func() bool { return len(srv.stored()) == 3 })
	if n := daemon.Waits.Load(); n != 0 {
		t.Fatalf("the plugins' Events took %d tokens from the daemon's client limit", n)
	}
}
