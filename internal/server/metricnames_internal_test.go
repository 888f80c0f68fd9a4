package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/pluginmetrics"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// metricNamesFile is the list deploy/monitoring's check (a module of its
// own, with Prometheus's PromQL parser) holds every query's metric names
// to.
var metricNamesFile = filepath.Join("..", "..", "deploy", "monitoring", "metrics.txt")

// regenerate is how a person brings metricNamesFile up to date.
const regenerate = "UPDATE_METRIC_NAMES=1 go test ./internal/server -run TestMetricNames"

// histograms are the families that are histograms or summaries but have
// no series in this test's registry (no plugin runs, no controller
// reconciles), so their kind is not gathered: each stands for its
// _bucket, _sum and _count series. The test fails when one is no longer
// exposed, and a gathered histogram is expanded whether listed or not.
var histograms = []string{
	"controller_runtime_reconcile_time_seconds",
	"informer_host_filter_decide_seconds",
	"informer_host_plugin_handle_seconds",
	"informer_host_plugin_http_request_seconds",
	"informer_host_plugin_queue_wait_seconds",
	"informer_host_plugin_write_seconds",
	"workqueue_queue_duration_seconds",
	"workqueue_work_duration_seconds",
}

var (
	fqName         = regexp.MustCompile(`fqName: "([^"]+)"`)
	varLabels      = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	constLabels    = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	constLabelName = regexp.MustCompile(`(?:^|,)([a-zA-Z_][a-zA-Z0-9_]*)=`)
)

// The series /metrics can serve, with their label names, from the registry a daemon's
// server builds (Start) with what the daemon attaches to it (a Host with
// a writes client, its plugins' own metrics, the resources' counts, the
// plugin sources): every family each collector describes, a histogram as
// its _bucket, _sum and _count. deploy/monitoring/metrics.txt must equal
// them, so the dashboard's and alerts' queries are checked against what
// the daemon exposes, not against a list kept by hand.
func TestMetricNames(t *testing.T) {
	ctx := t.Context()
	s, h, src := attachedServer(t, ctx)

	// What is served: every family gathered must be one described below,
	// so no collector is left out of the list.
	h.PluginMetrics().(*pluginmetrics.Registry).PluginLimits("names.wasm", pluginmetrics.Limits{MaxSeries: 1, MaxBytes: 1 << 10})
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]dto.MetricType{}
	for _, mf := range mfs {
		kinds[mf.GetName()] = mf.GetType()
	}

	// The server's own collectors (Start makes fresh ones; a registry
	// knows a collector by its descriptions, so equal ones stand for
	// them), then what Attach and AttachSources register.
	cs := []prometheus.Collector{
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		// promhttp.HandlerFor registers this one when given the registry.
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "promhttp_metric_handler_errors_total"}, []string{"cause"}),
		newRefused(), readyMetrics{s}, h, s.counts, src,
	}
	described := map[string][]string{} // name: label names
	add := func(d *prometheus.Desc) {
		ds := d.String()
		m, v, c := fqName.FindStringSubmatch(ds), varLabels.FindStringSubmatch(ds), constLabels.FindStringSubmatch(ds)
		if m == nil || v == nil || c == nil {
			t.Fatalf("no name or labels in %s", d)
		}
		var ls []string
		for l := range strings.SplitSeq(v[1], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				ls = append(ls, l)
			}
		}
		for _, l := range constLabelName.FindAllStringSubmatch(c[1], -1) {
			ls = append(ls, l[1])
		}
		described[m[1]] = ls
	}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			add(d)
		}
	}
	// The plugins' own metrics are an unchecked collector (their names
	// are the plugins'): its own three families show once a plugin has a
	// set, and the plugins' families are no part of the list.
	pm := h.PluginMetrics()
	ms := make(chan prometheus.Metric, 64)
	go func() { pm.Collect(ms); close(ms) }()
	for m := range ms {
		add(m.Desc())
	}
	for name := range kinds {
		if _, ok := described[name]; !ok {
			t.Errorf("/metrics serves %s, which none of the collectors this test lists describes: add the collector that serves it", name)
		}
	}
	for _, c := range cs {
		if !s.reg.Unregister(c) {
			t.Errorf("%T is not registered in the server's registry: the test's list differs from what the daemon serves", c)
		}
	}

	var names []string
	line := func(name string, labels []string, extra ...string) string {
		ls := slices.Sorted(slices.Values(append(slices.Clone(labels), extra...)))
		return strings.Join(append([]string{name}, ls...), " ")
	}
	for name, ls := range described {
		// The Go runtime's and the process's series are client_golang's
		// and differ by platform (the process collector reads /proc); the
		// dashboard and alerts use none, so the list leaves them out and
		// stays the same on every machine.
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		kind, gathered := kinds[name]
		switch {
		case gathered && kind == dto.MetricType_HISTOGRAM || !gathered && slices.Contains(histograms, name):
			names = append(names, line(name+"_bucket", ls, "le"), line(name+"_sum", ls), line(name+"_count", ls))
		case gathered && kind == dto.MetricType_SUMMARY:
			names = append(names, line(name, ls, "quantile"), line(name+"_sum", ls), line(name+"_count", ls))
		default:
			names = append(names, line(name, ls))
		}
	}
	for _, name := range histograms {
		if _, ok := described[name]; !ok {
			t.Errorf("histogram %s is no longer exposed: drop it from this test's list", name)
		}
	}
	slices.Sort(names)
	want := "# The series informer-host's /metrics serves, one a line: the name, then\n# its label names (the scrape adds its own). Written by\n# " + regenerate +
		"\n# and read by deploy/monitoring/check. Do not edit by hand.\n" + strings.Join(names, "\n") + "\n"
	if os.Getenv("UPDATE_METRIC_NAMES") != "" {
		if err := os.WriteFile(metricNamesFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(metricNamesFile)
	if err != nil {
		t.Fatalf("%v: write it with %s", err, regenerate)
	}
	if string(got) != want {
		t.Errorf("%s is stale (the daemon's metrics changed): regenerate it with\n\t%s\nthen check that the dashboard and alerts still hold (make test runs deploy/monitoring/check)\n%s",
			metricNamesFile, regenerate, lineDiff(string(got), want))
	}
}

// The daemon's readiness is a metric as well as /readyz: unready while
// nothing is attached, ready as a standby, ready once a synced pipeline
// and host are attached.
func TestReadyMetric(t *testing.T) {
	ctx := t.Context()
	s, err := Start(ctx, Options{Address: "127.0.0.1:0", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if r, sb := readyValues(s); r != 0 || sb != 0 {
		t.Errorf("nothing attached: ready %v standby %v, want 0 0", r, sb)
	}
	s.Standby("standby: waiting for the lease")
	if r, sb := readyValues(s); r != 1 || sb != 1 {
		t.Errorf("standby: ready %v standby %v, want 1 1", r, sb)
	}
	s2, _, _ := attachedServer(t, ctx)
	if r, sb := readyValues(s2); r != 1 || sb != 0 {
		t.Errorf("attached, nothing to sync: ready %v standby %v, want 1 0", r, sb)
	}
}

// readyValues are informer_host_ready and informer_host_standby.
func readyValues(s *Server) (float64, float64) {
	r := readyMetrics{s}
	return testutil.ToFloat64(onlyDesc{r, descReady}), testutil.ToFloat64(onlyDesc{r, descStandby})
}

// onlyDesc is one family of a collector, for testutil.ToFloat64.
type onlyDesc struct {
	c prometheus.Collector
	d *prometheus.Desc
}

func (o onlyDesc) Describe(ch chan<- *prometheus.Desc) { ch <- o.d }

func (o onlyDesc) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 16)
	go func() { o.c.Collect(all); close(all) }()
	for m := range all {
		if m.Desc() == o.d {
			ch <- m
		}
	}
}

// attachedServer is a server as the daemon builds it, with a host (no
// plugins, no cluster: fake clients) and plugin sources attached.
func attachedServer(t *testing.T, ctx context.Context) (*Server, *host.Host, *pluginsource.Manager) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse("config.yaml", fmt.Appendf(nil, "apiVersion: informer-host/v1\nplugins:\n  directory: %s\n", dir))
	if err != nil {
		t.Fatal(err)
	}
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{}}}
	p, err := informer.New(informer.Options{Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Discovery: disco, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	writes, err := kubewrite.New(kubewrite.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(ctx, host.Options{Pipeline: p, Config: cfg, CacheDir: "-", Logger: discard, Writes: writes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(context.Background()) })
	store, err := pluginsource.NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src, err := pluginsource.New(pluginsource.Options{Host: h, Store: store, Fetcher: &pluginsource.Fetchers{}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(ctx, Options{Address: "127.0.0.1:0", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if err := s.Attach(p, h, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AttachSources(src); err != nil {
		t.Fatal(err)
	}
	return s, h, src
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for l := range strings.SplitSeq(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for l := range strings.SplitSeq(b, "\n") {
		if !ina[l] {
			out = append(out, "+ "+l)
		}
	}
	for l := range strings.SplitSeq(a, "\n") {
		if !inb[l] {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
