package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// rowWith returns the one row whose "case: measure | baseline" contains what,
// failing the test when there is none or more than one.
func rowWith(t *testing.T, rows []row, what string) row {
	t.Helper()
	var found []row
	for _, x := range rows {
		if strings.Contains(x.Case+": "+x.What+" | "+x.Base, what) {
			found = append(found, x)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d rows contain %q, want 1", len(found), what)
	}
	return found[0]
}

func checkRow(t *testing.T, x row, host, base, ratio, target, met string) {
	t.Helper()
	got := []string{x.Host, x.Base, x.Ratio, x.Target, x.Met}
	want := []string{host, base, ratio, target, met}
	for i := range got {
		if want[i] != "" && !strings.Contains(got[i], want[i]) {
			t.Errorf("row %q: column %d is %q, want it to contain %q", x.What, i, got[i], want[i])
		}
	}
}

// The performance goals' rows, each against its baseline of the same run, with the
// issue's goals as their targets; and the same after results.json's round
// trip (-render).
func TestReportRows(t *testing.T) {
	res := &results{
		Go: benchResults{
			"BenchmarkBatch/noop-go/batch=1":       {"ns/op": {8000, 8100, 8200}},
			"BenchmarkBatch/noop-go/batch=8":       {"ns/op": {4000}},
			"BenchmarkBatch/noop-go/batch=64":      {"ns/op": {3600}},
			"BenchmarkBatch/noop-c-batch/batch=1":  {"ns/op": {400}},
			"BenchmarkBatch/noop-c-batch/batch=64": {"ns/op": {1800}},
			"BenchmarkCacheRead/noop":              {"ns/op": {9000}, "cpu-ns/op": {1000}},
			"BenchmarkCacheRead/list-100":          {"ns/op": {9000}, "cpu-ns/op": {3400}},
			"BenchmarkCacheRead/list-100-changed":  {"ns/op": {9000}, "cpu-ns/op": {16000}},
			"BenchmarkCacheRead/lister-list":       {"ns/op": {9000}, "cpu-ns/op": {5000}},
			"BenchmarkView/map":                    {"B/object": {115.9}},
			"BenchmarkView/more":                   {"B/object": {10.2}},
			"BenchmarkLoadWarm":                    {"cpu-ms/op": {114}},
			"BenchmarkLoadCold":                    {"cpu-ms/op": {2280}},
		},
		Throughput: []throughputRun{
			{Side: "host", Rate: map[string]float64{"create": 960, "update": 900, "delete": 1000}, P99: 12, CPU: 1.3},
			{Side: "native", Rate: map[string]float64{"create": 1000, "update": 1000, "delete": 1000}, P99: 10, CPU: 0.5},
			{Side: "native-n", Rate: map[string]float64{"update": 1000}, P99: 10, CPU: 1.0},
		},
		Reload: []reloadRun{
			{Plugin: "go-small", Cache: "cold", Compile: 900, Swap: 10},
			{Plugin: "go-small", Cache: "warm", Compile: 80, Swap: 10},
		},
		Memory: []memoryRun{
			{Side: "native-stripped", RSS: 100, Peak: 100},
			{Side: "host", Plugins: 10, RSS: 119, Peak: 130}, {Side: "host", Plugins: 20, RSS: 170},
			{Side: "host", Plugins: 10, RSS: 121, Peak: 126}, {Side: "host", Plugins: 20, RSS: 177},
			{Side: "native-stripped-relist", RSS: 101, Peak: 200, Relist: "proxy", Lists: 1},
			{Side: "host-relist", Plugins: 10, RSS: 125, Peak: 260, Relist: "proxy", Lists: 1},
		},
		// A reload's compile child counts with the daemon, CPU and peak.
		Converge: []convergeRun{
			{Side: "host", Seconds: 18, CPU: 1.0, RSS: 100},
			{Side: "native", Seconds: 18, CPU: 0.8, RSS: 90},
			{Side: "host-reload", Seconds: 17, CPU: 1.2, ChildCPU: 0.5, RSS: 120, ChildRSS: 100},
			{Side: "native-restart", Seconds: 17, CPU: 0.85, RSS: 95},
		},
		Load: []loadSample{{Load1: 2, Case: "go"}, {Load1: 4, Case: "go"}, {Load1: 7, Case: "3"}},
		Params: map[string]any{"throughputN": 5000, "throughputPlugins": 10, "memoryN": 50000, "memoryPlugins": 10,
			"convergeN": 1000, "convergeQPS": 50, "convergeBurst": 100},
	}
	check := func(t *testing.T, res *results) {
		res.rows = nil
		res.buildRows()
		rows := res.rows
		checkRow(t, rowWith(t, rows, "noop-go (Go kit), no-op handler: ns per event at batch 8 "), "4.00 µs", "batch 1 (ih_handle, one call per event): 8.10 µs", "0.49x", "", "—")
		checkRow(t, rowWith(t, rows, "noop-go (Go kit), no-op handler: ns per event at batch 64 "), "3.60 µs", "8.10 µs", "0.44x", "", "")
		checkRow(t, rowWith(t, rows, "noop-c-batch (C, informer_host.h IH_HANDLE_BATCH), no-op handler: ns per event at batch 64"), "1.80 µs", "400 ns", "4.50x", "", "")
		// Both cache_list rows over the no-op call, against the Lister.
		checkRow(t, rowWith(t, rows, "unchanged since the last read (answered from the memo), CPU per call"), "3.40 µs (2.40 µs)", "Lister List", "0.48x", "≤ 10 µs", "**yes**")
		checkRow(t, rowWith(t, rows, "the caches changed since the last read"), "(15 µs)", "5.00 µs", "3.00x", "≤ 10 µs", "**no**")
		checkRow(t, rowWith(t, rows, "5000 ConfigMaps, create: events/s"), "960", "1000", "0.96x", "≥ 0.95x", "**yes**")
		checkRow(t, rowWith(t, rows, "5000 ConfigMaps, update: events/s"), "", "", "0.90x", "≥ 0.95x", "**no**")
		checkRow(t, rowWith(t, rows, "native with 10 handlers"), "", "", "1.30x", "CPU ≤ 1.1x", "**no**")
		checkRow(t, rowWith(t, rows, "3 e2e: delivery latency p99"), "", "", "1.20x", "≤ 1.2x", "**yes**")
		checkRow(t, rowWith(t, rows, "go-small plugin, warm cache"), "80 ms + 10 ms", "same plugin, cold cache: 900 ms + 10 ms", "0.10x", "compile+swap ≤ 100 ms", "**yes**")
		checkRow(t, rowWith(t, rows, "warm on-disk cache (compiled code and rewrite): CPU"), "114 ms", "2280 ms", "0.05x", "", "")
		checkRow(t, rowWith(t, rows, "10 Go plugins (peak) | plain informer, managedFields stripped"), "120 MiB", "managedFields stripped like the daemon: 100 MiB", "1.20x", "≤ 1.2x", "**yes**")
		checkRow(t, rowWith(t, rows, "peak RSS (VmHWM) with 50000 cached ConfigMaps, 10 Go plugins"), "128 MiB (120)", "100 MiB (100)", "1.28x", "≤ 1.25x", "**no**")
		checkRow(t, rowWith(t, rows, "9 converge: 1000 Pods, owner chain from the cache, server-side apply, writes limited to 50/s, burst 100 on both sides: CPU until then"), "1.00 s", "0.80 s", "1.25x", "≤ 1.3x", "**yes**")
		checkRow(t, rowWith(t, rows, "team-labeler: peak RSS (VmHWM)"), "100 MiB", "90 MiB", "1.11x", "≤ 1.25x", "**yes**")
		checkRow(t, rowWith(t, rows, "CPU, a compile child's included (cost"), "1.70 s (+0.70 s", "native restarted: 0.85 s (+0.05 s)", "", "reload cost ≤ restart cost + 0.5 s", "**no**")
		checkRow(t, rowWith(t, rows, "reload vs restart: peak RSS (VmHWM)"), "120 MiB + 100 MiB", "95 MiB", "2.32x", "≤ 1.25x", "**no**")
		checkRow(t, rowWith(t, rows, "relist (watch cut + etcd compaction) at 50000 ConfigMaps, 10 Go plugins: peak RSS (VmHWM) over the relist (410 from the proxy)"),
			"260 MiB", "managedFields stripped like the daemon: 200 MiB", "1.30x", "≤ 1.25x", "**no**")
		// The runs: 5.1 and 5.6 MiB; the medians: (173.5 − 120) / 10.
		checkRow(t, rowWith(t, rows, "one more Go plugin"), "+5.3 (5.1–5.6) MiB, stable", "", "", "≤ 6 MiB in every run", "**yes**")
		checkRow(t, rowWith(t, rows, "one more plugin's view over keys already interned"), "10.2 B", "115.9 B", "0.09x", "", "")
	}
	t.Run("measured", func(t *testing.T) { check(t, res) })
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	again := &results{}
	if err := json.Unmarshal(b, again); err != nil {
		t.Fatal(err)
	}
	t.Run("rendered", func(t *testing.T) { check(t, again) })
}

// A spread of more than stableMiB between runs misses the goal even when
// every run is under 6 MiB.
func TestMorePluginStable(t *testing.T) {
	res := &results{Memory: []memoryRun{
		{Side: "host", Plugins: 10, RSS: 100}, {Side: "host", Plugins: 20, RSS: 130},
		{Side: "host", Plugins: 10, RSS: 100}, {Side: "host", Plugins: 20, RSS: 155},
	}, Params: map[string]any{"memoryPlugins": 10}}
	if got := res.morePluginRuns(10); len(got) != 2 || got[0] != 3 || got[1] != 5.5 {
		t.Fatalf("morePluginRuns = %v, want [3 5.5]", got)
	}
	res.buildRows()
	checkRow(t, rowWith(t, res.rows, "one more Go plugin"), "(3.0–5.5) MiB, not stable", "", "", "", "**no**")
}

func TestLoadSummary(t *testing.T) {
	if got := loadSummary(nil); got != "not sampled" {
		t.Errorf("no samples: %q", got)
	}
	got := loadSummary([]loadSample{{Load1: 2, Case: "go"}, {Load1: 4, Case: "go"}, {Load1: 3, Case: "go"}, {Load1: 7, Case: "3"}})
	for _, want := range []string{"min 2.00 / median 3.50 / max 7.00", "4 samples", "go 3.00 (2.00–4.00), 3 7.00 (7.00–7.00)"} {
		if !strings.Contains(got, want) {
			t.Errorf("loadSummary = %q, want it to contain %q", got, want)
		}
	}
}

// The sampler samples at every phase, whatever its interval, and its
// samples carry the phase they fell in.
func TestLoadSampler(t *testing.T) {
	if _, err := readLoad1(); err != nil {
		t.Skip(err)
	}
	s := startLoadSampler(time.Hour)
	s.phase("go")
	s.phase("3")
	got := s.stop()
	if len(got) != 3 || got[0].Case != "go" || got[1].Case != "3" || got[2].Case != "3" {
		t.Fatalf("samples %+v, want go, 3 and the last one (3)", got)
	}
}

// Results of a run whose Lister benchmarks report no CPU are rendered
// from the wall times, and say so.
func TestCacheRowsWall(t *testing.T) {
	res := &results{Go: benchResults{
		"BenchmarkCacheRead/noop":        {"ns/op": {1000}, "cpu-ns/op": {500}},
		"BenchmarkCacheRead/list-100":    {"ns/op": {3000}, "cpu-ns/op": {900}},
		"BenchmarkCacheRead/lister-list": {"ns/op": {4000}},
	}}
	res.buildRows()
	checkRow(t, rowWith(t, res.rows, "unchanged since the last read (answered from the memo), wall per call"), "3.00 µs (2.00 µs)", "4.00 µs", "0.50x", "", "**yes**")
}
