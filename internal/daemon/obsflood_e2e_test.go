package daemon

import (
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/testenv"
)

// floodClients is the flood of the reliability report that took the
// daemon past its 1Gi limit: 200 clients that request and never read.
const floodClients = 200

// A plugin with a plain metrics grant fills its budget with the longest
// labels the ABI allows on a 64-bucket histogram; then 200 loopback
// clients request /metrics and /debug/plugins and never read the body.
// What they make the daemon hold stays within a bound derived from the
// budgets (the scrape slots times the largest response), far below the
// shipped memory limit, and a normal scrape succeeds afterwards.
func TestScrapeFloodStaysWithinBudget(t *testing.T) {
	cfg := writeDaemonConfig(t, env.Namespace(t), "flood.wasm", "testdata/metricflood.wat", "")
	// The grant of the report: a plain one, every bound at its default.
	cfgPath := cfg.ResolvePath("config.yaml")
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	const at = "    limits: {restartBackoff: 10ms}\n"
	if !strings.Contains(string(text), at) {
		t.Fatalf("no %q in the config:\n%s", at, text)
	}
	text = []byte(strings.Replace(string(text), at, at+"    grants: {metrics: {}}\n", 1))
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err = config.Load(cfgPath); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, cfg, Options{})
	defer func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testenv.Eventually(t, "ready", func() bool { code, _ := testenv.Get(t, r.url+"/readyz"); return code == http.StatusOK })
	addr := strings.TrimPrefix(r.url, "http://")

	// The plugin has filled what it may before it is ready; one scrape
	// shows it and leaves the heap as a scrape leaves it.
	code, body := testenv.Get(t, r.url+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `informer_host_plugin_metrics_series{plugin="flood.wasm"}`) {
		t.Fatalf("scrape before the flood: %d, %d bytes", code, len(body))
	}
	t.Logf("a scrape is %d bytes", len(body))
	base, rssBase := liveHeap(), vmRSS(t)

	conns := make([]net.Conn, 0, floodClients)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	statuses := map[string]int{}
	for i := range floodClients {
		path := "/metrics"
		if i%2 == 1 {
			path = "/debug/plugins"
		}
		c, status := testenv.StalledGet(t, addr, path)
		conns = append(conns, c)
		statuses[path+" "+status]++
	}
	held, rss := liveHeap()-base, vmRSS(t)-rssBase
	// Each scrape slot holds at most one response of the bound; the
	// responses of /debug/plugins are small. Twice that covers a buffer's
	// growth by doubling, and the rest of the daemon moving meanwhile.
	bound := 2 * server.DefaultMaxConcurrentScrapes * (int64(server.DefaultHostMetricsBytes) + int64(config.DefaultMetricsMaxBytes))
	t.Logf("200 stalled clients (%v): live heap %+d MiB over %d MiB, VmRSS %+d MiB over %d MiB; bound %d MiB",
		statuses, held>>20, base>>20, rss>>20, rssBase>>20, bound>>20)
	if held > bound || rss > bound {
		t.Errorf("stalled clients hold %d MiB of heap and %d MiB of RSS, past the bound of %d MiB", held>>20, rss>>20, bound>>20)
	}

	for _, c := range conns {
		_ = c.Close()
	}
	conns = conns[:0]
	attempts := 0
	testenv.Eventually(t, "a normal scrape once the flood has gone", func() bool {
		if attempts++; attempts > 1000 {
			t.Fatal("no normal scrape in 1000 attempts")
		}
		code, body := testenv.Get(t, r.url+"/metrics")
		return code == http.StatusOK && strings.Contains(body, `informer_host_plugin_metrics_series{plugin="flood.wasm"}`)
	})
	if code, _ := testenv.Get(t, r.url+"/debug/plugins"); code != http.StatusOK {
		t.Errorf("/debug/plugins after the flood: %d", code)
	}
}

// liveHeap is the Go heap still reachable after a full collection.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// vmRSS is the process's resident set size, as /proc reports it.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
