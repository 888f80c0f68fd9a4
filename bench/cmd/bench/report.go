package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	Go            benchResults    `json:"go"`
	Throughput    []throughputRun `json:"throughput"`
	Reload        []reloadRun     `json:"reload"`
	ReloadControl reloadControl   `json:"reloadControl"`
	Start         []startRun      `json:"start"`
	Pull          []pullRun       `json:"pull"`
	Memory        []memoryRun     `json:"memory"`
	Idle          []memoryRun     `json:"idle"`
	Isolation     []isolationRun  `json:"isolation"`
	Restart       []isolationRun  `json:"restart"`
	Failover      []failoverRun   `json:"failover"`
	Peers         []throughputRun `json:"peers"`
	Converge      []convergeRun   `json:"converge"`
	Copy          *copyResults    `json:"copy,omitempty"`
	Scale         []scaleRun      `json:"scale,omitempty"`
	Load          []loadSample    `json:"load,omitempty"`
	Params        map[string]any  `json:"params"`
	Errors        []string        `json:"errors,omitempty"`
	Began         time.Time       `json:"began"`
	Took          time.Duration   `json:"took"`
	Machine       string          `json:"machine"`

	rows []row
}

// row is one line of the table.
type row struct {
	Case, What, Host, Base, Ratio, Target, Met string
}

func (r *results) add(x row) { r.rows = append(r.rows, x) }

// paramInt reads an integer parameter, also after a JSON round trip.
func paramInt(p map[string]any, k string) int {
	switch v := p[k].(type) {
	case int:
		return v
	case float64:
		return int(v)
	}
	return 0
}

// Formatting.

func fmtNs(ns float64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 10_000:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	case ns < 1_000_000:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	case ns < 10_000_000:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	default:
		return fmt.Sprintf("%.0f ms", ns/1e6)
	}
}

func fmtMs(ms float64) string { return fmtNs(ms * 1e6) }

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func yes(ok bool) string {
	if ok {
		return "**yes**"
	}
	return "**no**"
}

// buildRows turns the measurements into the table.
func (r *results) buildRows() {
	g := r.Go
	ns := func(name, metric string) (float64, bool) { return g.get(name, metric) }

	if rss, ok := ns("BenchmarkInstanceMemory", "rss-MiB/inst"); ok {
		heap, _ := ns("BenchmarkInstanceMemory", "goheap-MiB/inst")
		guest, _ := ns("BenchmarkInstanceMemory", "guest-MiB/inst")
		r.add(row{"5 memory", "one instance of a Go plugin after 5,000 events, settled: RSS (live Go heap; linear memory size)",
			fmt.Sprintf("%.1f MiB (%.2f; %.1f)", rss, heap, guest), "", "", "", "—"})
	}

	// Case 1: dispatch.
	for _, deadline := range []string{"true", "false"} {
		for _, p := range []string{"noop-wat", "noop-c", "noop-go"} {
			for _, obj := range []string{"meta", "pod"} {
				d, ok1 := ns(fmt.Sprintf("BenchmarkDispatch/dispatch/%s/%s/deadline=%s", p, obj, deadline), "cpu-ns/op")
				hp, ok2 := ns(fmt.Sprintf("BenchmarkDispatch/handle/%s/%s/deadline=%s", p, obj, deadline), "ns/op")
				hw, ok3 := ns(fmt.Sprintf("BenchmarkDispatch/handle/noop-wat/%s/deadline=%s", obj, deadline), "ns/op")
				nat, ok4 := ns("BenchmarkDispatch/native/decode/"+obj, "cpu-ns/op")
				noop, ok5 := ns("BenchmarkDispatch/native/noop/"+obj, "cpu-ns/op")
				if !(ok1 && ok2 && ok3 && ok4 && ok5) {
					continue
				}
				// Host overhead: the whole path, less the guest's own work
				// (its call minus an empty call), less what a no-op native
				// listener costs when called the same way.
				over := d - (hp - hw) - noop
				dl := "deadline on (1m)"
				if deadline == "false" {
					dl = "no deadline"
				}
				// The 1.5 µs goal is for the deadline on; without a
				// deadline the earlier 2 µs stays.
				target, limit := "overhead ≤ 2 µs", 2000.0
				if deadline == "true" {
					target, limit = "overhead ≤ 1.5 µs", 1500
				}
				r.add(row{"1 dispatch", fmt.Sprintf("%s, %s object, %s: CPU per event (host overhead)", p, obj, dl),
					fmt.Sprintf("%s (%s)", fmtNs(d), fmtNs(over)), "native handler decoding it: " + fmtNs(nat),
					ratio(d, nat), target, yes(over <= limit)})
			}
		}
	}
	for _, deadline := range []string{"true", "false"} {
		if v, ok := ns("BenchmarkDispatch/pingpong/noop-wat/meta/deadline="+deadline, "ns/op"); ok {
			c, _ := ns("BenchmarkDispatch/pingpong/noop-wat/meta/deadline="+deadline, "cpu-ns/op")
			r.add(row{"1 dispatch", "one event at a time to an idle worker (noop-wat, deadline " + deadline + "): latency (CPU)",
				fmt.Sprintf("%s (%s)", fmtNs(v), fmtNs(c)), "", "", "", "—"})
		}
	}
	// The batch export (ABI.md §5): ns per event handed over in batches
	// of 8 and 64, against batch 1, one ih_handle call per event, of the
	// same plugin in the same run.
	for _, p := range []struct{ name, what string }{
		{"noop-go", "Go kit"}, {"noop-c-batch", "C, informer_host.h IH_HANDLE_BATCH"},
	} {
		one, ok := ns("BenchmarkBatch/"+p.name+"/batch=1", "ns/op")
		if !ok {
			continue
		}
		for _, size := range []int{8, 64} {
			v, ok := ns(fmt.Sprintf("BenchmarkBatch/%s/batch=%d", p.name, size), "ns/op")
			if !ok {
				continue
			}
			r.add(row{"1 batch", fmt.Sprintf("%s (%s), no-op handler: ns per event at batch %d (ih_handle_batch)", p.name, p.what, size),
				fmtNs(v), "batch 1 (ih_handle, one call per event): " + fmtNs(one), ratio(v, one), "", "—"})
		}
	}
	guest := func(plugin, obj, deadline string) (float64, bool) {
		return ns(fmt.Sprintf("BenchmarkGuest/%s/%s/deadline=%s", plugin, obj, deadline), "ns/op")
	}
	for _, obj := range []string{"meta", "pod"} {
		if v, ok := guest("twofields", obj, "on"); ok {
			n, _ := ns("BenchmarkGuest/native/twofields/"+obj, "ns/op")
			r.add(row{"1 guest", "Go guest reads two fields (header + 2 field_read), " + obj + ", deadline on",
				fmtNs(v), "native Go: " + fmtNs(n), ratio(v, n), "< 5 µs", yes(v < 5000)})
		}
	}
	for _, obj := range []string{"meta", "pod"} {
		if v, ok := guest("decode-go", obj, "on"); ok {
			n, _ := ns("BenchmarkGuest/native/decode-map/"+obj, "ns/op")
			r.add(row{"1 guest", "Go guest decodes the object (encoding/json, map), " + obj + ", deadline on",
				fmtNs(v), "native Go: " + fmtNs(n), ratio(v, n), "(issue: 270–585 µs)", "—"})
		}
		if v, ok := guest("k8sapi", obj, "on"); ok {
			n, _ := ns("BenchmarkGuest/native/decode-typed/"+obj, "ns/op")
			r.add(row{"1 guest", "Go guest decodes into k8s.io/api types, " + obj + ", deadline on",
				fmtNs(v), "native Go: " + fmtNs(n), ratio(v, n), "", "—"})
		}
	}
	for _, p := range []string{"noop-wat", "noop-go", "twofields", "decode-go"} {
		on, ok1 := guest(p, "pod", "on")
		wz, ok2 := guest(p, "pod", "wazero")
		off, ok3 := guest(p, "pod", "off")
		if ok1 && ok2 && ok3 {
			r.add(row{"1 guest", fmt.Sprintf("%s, pod: call with deadline, injected checks (no deadline: %s)", p, fmtNs(off)),
				fmtNs(on), "wazero's checks: " + fmtNs(wz), ratio(on, wz), "", "—"})
		}
	}
	for _, obj := range []string{"meta", "pod"} {
		h, ok1 := ns("BenchmarkEncode/header/"+obj, "ns/op")
		j, ok2 := ns("BenchmarkEncode/json/"+obj, "ns/op")
		if ok1 && ok2 {
			r.add(row{"1 encode", "per event, once for all plugins: header; JSON if a plugin reads the object (" + obj + ")",
				fmtNs(h) + "; " + fmtNs(j), "", "", "", "—"})
		}
	}

	// Filters.
	for _, f := range []string{"label", "field", "exists", "changed", "transition", "shared10"} {
		v, ok := ns("BenchmarkDecide/"+f, "ns/op")
		if !ok {
			continue
		}
		what, per := "filter decision: "+f, v
		if f == "shared10" {
			what = "filter decision: one expression shared by 10 plugins (per plugin)"
			per = v / 10
		}
		target, met := "< 2 µs", yes(per < 2000)
		if f == "exists" || f == "transition" {
			// Not among the filter targets: a comprehension (cost-tracked),
			// and an update judged on both states (two evaluations).
			target, met = "", "—"
		}
		r.add(row{"filter", what, fmtNs(per), "", "", target, met})
	}

	// Capabilities, each next to what a native controller pays
	// for the same, measured in the same run.
	// CPU per call where both sides report it (the wall time of a read on
	// a loaded machine is mostly the wait for a core); wall in older runs.
	cacheMetric, cacheUnit := "cpu-ns/op", "CPU"
	if _, ok := ns("BenchmarkCacheRead/lister-list", cacheMetric); !ok {
		cacheMetric, cacheUnit = "ns/op", "wall"
	}
	if noop, ok := ns("BenchmarkCacheRead/noop", cacheMetric); ok {
		for _, c := range []struct {
			sub, what, native, nativeWhat, target string
			limit                                 float64
		}{
			{"get-field", "cache_get + one field_read of a cached ConfigMap, per call (over a no-op call)", "lister-get",
				"client-go Lister Get + unstructured.NestedString", "≤ 1.5 µs over a no-op call", 1500},
			{"list-100", "cache_list of 100 keys (one page), the caches unchanged since the last read (answered from the memo), per call (over a no-op call)", "lister-list",
				"client-go Lister List of the namespace (100) + their keys", "≤ 10 µs over a no-op call", 10_000},
			{"list-100-changed", "cache_list of 100 keys (one page), the caches changed since the last read (listed afresh), per call (over a no-op call)", "lister-list",
				"client-go Lister List of the namespace (100) + their keys", "≤ 10 µs over a no-op call", 10_000},
		} {
			v, ok1 := ns("BenchmarkCacheRead/"+c.sub, cacheMetric)
			n, ok2 := ns("BenchmarkCacheRead/"+c.native, cacheMetric)
			if ok1 && ok2 {
				r.add(row{"cache", strings.Replace(c.what, "per call", cacheUnit+" per call", 1), fmt.Sprintf("%s (%s)", fmtNs(v), fmtNs(v-noop)), c.nativeWhat + ": " + fmtNs(n),
					ratio(v-noop, n), c.target, yes(v-noop <= c.limit)})
			}
		}
	}
	for _, op := range []struct{ name, native string }{
		{"get", "Go map lookup + copy of the value out"}, {"set", "Go map store of a copy of the value"},
	} {
		v, ok1 := ns("BenchmarkState/host/"+op.name, "ns/call")
		n, ok2 := ns("BenchmarkState/gomap/"+op.name, "ns/call")
		if ok1 && ok2 {
			r.add(row{"state", "state_" + op.name + " of a 100-byte value (in memory), per host call",
				fmtNs(v), op.native + ": " + fmtNs(n), ratio(v, n), "≤ 1 µs", yes(v <= 1000)})
		}
	}
	if noop, ok := ns("BenchmarkMetricAdd/noop-host-call-x1000", "ns/op"); ok {
		for _, c := range []struct{ sub, what, native, nativeWhat string }{
			{"add", "no label", "prometheus-counter", "Prometheus Counter.Add"},
			{"add-label", "one label", "prometheus-countervec", "Prometheus CounterVec.WithLabelValues + Add"},
		} {
			v, ok := ns("BenchmarkMetricAdd/"+c.sub+"-x1000", "ns/op")
			n, okn := ns("BenchmarkMetricAdd/"+c.native+"-x1000", "ns/op")
			if ok && okn {
				over := (v - noop) / 1000
				r.add(row{"metrics", "metric_add to a counter, " + c.what + ", per host call (over a no-op host call)",
					fmt.Sprintf("%s (%s)", fmtNs(v/1000), fmtNs(over)), c.nativeWhat + ": " + fmtNs(n/1000),
					ratio(over, n/1000), "≤ 100 ns over a no-op call", yes(over <= 100)})
			}
		}
	}
	// A plugin's HTTP call through a named upstream to a
	// loopback server, against the same call made with net/http.
	// CPU time per call (the loopback server's included) is the measure:
	// on a shared machine the wall time is mostly the wait for a core.
	if v, ok := ns("BenchmarkHTTPUpstream/plugin", "cpu-ns/op"); ok {
		if n, ok := ns("BenchmarkHTTPUpstream/net-http", "cpu-ns/op"); ok {
			vw, _ := ns("BenchmarkHTTPUpstream/plugin", "ns/op")
			nw, _ := ns("BenchmarkHTTPUpstream/net-http", "ns/op")
			r.add(row{"http", "http_request (POST, 64-byte JSON) + http_response_read from a plugin to a loopback upstream, CPU per call (wall)",
				fmt.Sprintf("%s (%s)", fmtNs(v), fmtNs(vw)), fmt.Sprintf("net/http Do + bounded read, same timeout: %s (%s)", fmtNs(n), fmtNs(nw)),
				ratio(v, n), "≤ 1.10x", yes(v <= 1.1*n)})
		}
	}

	// A Kubernetes write through the host against the same
	// write from native client-go, in the same run.
	if v, ok := ns("BenchmarkWrite/host-apply", "ns/op"); ok {
		if n, ok := ns("BenchmarkWrite/native-apply", "ns/op"); ok {
			r.add(row{"writes", "k8s_write server-side apply of a ConfigMap, per call (plugin, host, apiserver round trip)",
				fmtNs(v), "client-go dynamic client Apply, same body: " + fmtNs(n), ratio(v, n), "≤ 1.1x", yes(v/n <= 1.1)})
		}
	}

	// Case 2: fan-out.
	for _, p := range []string{"object-wat", "twofields", "noop-wat"} {
		one, ok := ns(fmt.Sprintf("BenchmarkFanout/%s/plugins=1", p), "cpu-ns/op")
		if !ok {
			continue
		}
		for _, n := range []int{10, 50} {
			v, ok := ns(fmt.Sprintf("BenchmarkFanout/%s/plugins=%d", p, n), "cpu-ns/op")
			if !ok {
				continue
			}
			target, met := "", "—"
			if p == "object-wat" && n == 10 {
				target, met = "≤ 3x", yes(v/one <= 3)
			}
			r.add(row{"2 fan-out", fmt.Sprintf("%s: full Pod to %d plugins, CPU per event (marginal per plugin %s)", p, n, fmtNs((v-one)/float64(n-1))),
				fmtNs(v), "1 plugin: " + fmtNs(one), ratio(v, one), target, met})
		}
	}

	// Case 3: end to end.
	if len(r.Throughput) > 0 {
		pick := func(side string, f func(throughputRun) float64) float64 {
			var xs []float64
			for _, t := range r.Throughput {
				if t.Side == side {
					xs = append(xs, f(t))
				}
			}
			return median(xs)
		}
		n := r.Params["throughputN"]
		for _, ph := range phases {
			h := pick("host", func(t throughputRun) float64 { return t.Rate[ph] })
			b := pick("native", func(t throughputRun) float64 { return t.Rate[ph] })
			r.add(row{"3 e2e", fmt.Sprintf("%v ConfigMaps, %s: events/s", n, ph), fmt.Sprintf("%.0f", h), fmt.Sprintf("%.0f", b),
				ratio(h, b), "≥ 0.95x", yes(h/b >= 0.95)})
		}
		h, b := pick("host", func(t throughputRun) float64 { return t.P50 }), pick("native", func(t throughputRun) float64 { return t.P50 })
		r.add(row{"3 e2e", "delivery latency p50 (write sent → handler entered)", fmtMs(h), fmtMs(b), ratio(h, b), "", "—"})
		h, b = pick("host", func(t throughputRun) float64 { return t.P99 }), pick("native", func(t throughputRun) float64 { return t.P99 })
		r.add(row{"3 e2e", "delivery latency p99", fmtMs(h), fmtMs(b), ratio(h, b), "≤ 1.2x", yes(h/b <= 1.2)})
		h, b = pick("host", func(t throughputRun) float64 { return t.CPU }), pick("native", func(t throughputRun) float64 { return t.CPU })
		r.add(row{"3 e2e", "CPU per event (the process's utime+stime)", fmtMs(h), fmtMs(b), ratio(h, b), "≤ 2x", yes(h/b <= 2)})
		if nn := pick("native-n", func(t throughputRun) float64 { return t.CPU }); nn > 0 {
			r.add(row{"3 e2e", fmt.Sprintf("native with %v handlers (as many listeners as plugins): CPU per event (the ratio); p99; update events/s",
				r.Params["throughputPlugins"]),
				fmt.Sprintf("%s; %s; %.0f", fmtMs(h), fmtMs(pick("host", func(t throughputRun) float64 { return t.P99 })),
					pick("host", func(t throughputRun) float64 { return t.Rate["update"] })),
				fmt.Sprintf("%s; %s; %.0f", fmtMs(nn), fmtMs(pick("native-n", func(t throughputRun) float64 { return t.P99 })),
					pick("native-n", func(t throughputRun) float64 { return t.Rate["update"] })),
				ratio(h, nn), "CPU ≤ 1.1x", yes(h/nn <= 1.1)})
		}
		miss := pick("host", func(t throughputRun) float64 { return float64(t.Missing) })
		if miss != 0 {
			r.add(row{"3 e2e", "latency records missing (median per run)", fmt.Sprintf("%.0f", miss), "", "", "", "—"})
		}
	}

	r.peerRows()     // case 8, peers_report.go
	r.convergeRows() // case 9, converge_report.go
	r.copyRows()     // case 10, copy_report.go

	// Case 4: reload and start.
	if len(r.Reload) > 0 {
		for _, p := range []string{"c", "go-small", "go-k8sapi"} {
			// A warm reload's baseline is the same plugin's cold one in
			// the same run: what the compilation cache saves.
			var coldComp, coldSwap float64
			for _, cache := range []string{"cold", "warm"} {
				var det, comp, swap, tot []float64
				for _, x := range r.Reload {
					if x.Plugin == p && x.Cache == cache {
						det, comp, swap, tot = append(det, x.Detect), append(comp, x.Compile), append(swap, x.Swap), append(tot, x.Total)
					}
				}
				if len(tot) == 0 {
					continue
				}
				c, sw := median(comp), median(swap)
				base, rt := "", ""
				if cache == "cold" {
					coldComp, coldSwap = c, sw
				} else if coldComp+coldSwap > 0 {
					base = fmt.Sprintf("same plugin, cold cache: %s + %s", fmtMs(coldComp), fmtMs(coldSwap))
					rt = ratio(c+sw, coldComp+coldSwap)
				}
				target, met := "swap < 50 ms", yes(sw < 50)
				if p == "go-small" && cache == "warm" {
					target = "swap < 50 ms; compile+swap ≤ 100 ms"
					met = yes(sw < 50 && c+sw <= 100)
				}
				r.add(row{"4 reload", fmt.Sprintf("%s plugin, %s cache: compile + swap (detect %s; file change → first event %s)", p, cache, fmtMs(median(det)), fmtMs(median(tot))),
					fmt.Sprintf("%s + %s", fmtMs(c), fmtMs(sw)), base, rt, target, met})
			}
		}
		for _, p := range []string{"go-k8sapi", "go-small"} {
			var sent, handled, p99, worst float64
			n := 0
			for _, x := range r.Reload {
				if x.Plugin == p && x.Cache == "cold" && x.OldEvents >= 0 {
					sent += float64(x.OldSent)
					handled += float64(x.OldEvents)
					p99 += x.OldP99
					worst = max(worst, x.OldMax)
					n++
				}
			}
			if n == 0 {
				continue
			}
			c := r.ReloadControl
			r.add(row{"4 reload", fmt.Sprintf("old version while a %s plugin compiles (cold): changes it handled, their delivery latency p99 (worst)", p),
				fmt.Sprintf("%.0f of %.0f, %s (%s)", handled, sent, fmtMs(p99/float64(n)), fmtMs(worst)),
				fmt.Sprintf("no reload: %s (%s)", fmtMs(c.P99), fmtMs(c.Max)), ratio(p99/float64(n), c.P99),
				"no gap: ≥ 95% handled, worst < 100 ms; p99 ≤ 1.5x", yes(handled >= 0.95*sent && worst < 100 && p99/float64(n) <= 1.5*c.P99)})
		}
	}
	for _, cache := range []string{"cold", "warm"} {
		var xs []float64
		plugins := 0
		for _, s := range r.Start {
			if s.Cache == cache {
				xs, plugins = append(xs, s.Ready), s.Plugins
			}
		}
		if len(xs) == 0 {
			continue
		}
		target, met := "", "—"
		if cache == "warm" {
			target, met = "< 2 s", yes(median(xs) < 2)
		}
		r.add(row{"4 start", fmt.Sprintf("start to ready, %d small Go plugins, %s cache", plugins, cache), fmt.Sprintf("%.2f s", median(xs)), "", "", target, met})
	}

	if warm, ok := ns("BenchmarkLoadWarm", "cpu-ms/op"); ok {
		if cold, ok := ns("BenchmarkLoadCold", "cpu-ms/op"); ok {
			r.add(row{"4 reload", "in process: Load of a small Go plugin (pod-phases, injected checks) in a running engine, warm on-disk cache (compiled code and rewrite): CPU",
				fmtMs(warm), "same Load, no cache (compiles afresh): " + fmtMs(cold), ratio(warm, cold), "", "—"})
		}
	}

	r.pullRows() // case 4p, pull.go

	// Case 7: failover.
	for _, sig := range []string{"TERM", "KILL"} {
		var first, all []float64
		var lease float64
		plugins := 0
		for _, f := range r.Failover {
			if f.Signal == sig {
				first, all, lease, plugins = append(first, f.First), append(all, f.All), f.Lease, f.Plugins
			}
		}
		if len(first) == 0 {
			continue
		}
		what := fmt.Sprintf("leader SIGTERM (lease released) → new leader's first delivery, %d Go plugins (all synced)", plugins)
		target, met := "< 2 s", yes(median(first) < 2)
		if sig == "KILL" {
			what = fmt.Sprintf("leader SIGKILL → new leader's first delivery, %d Go plugins, leaseDuration %.0f s (all synced)", plugins, lease)
			target, met = fmt.Sprintf("< leaseDuration + 1 s (%.0f s)", lease+1), yes(median(first) < lease+1)
		}
		r.add(row{"7 failover", what, fmt.Sprintf("%.2f s (%.2f s)", median(first), median(all)), "", "", target, met})
	}

	// Case 5: memory.
	if len(r.Memory) > 0 {
		pick := func(side string, plugins int) (rss, peak float64) {
			var a, b []float64
			for _, m := range r.Memory {
				if m.Side == side && (m.Side != "host" || m.Plugins == plugins) {
					a, b = append(a, m.RSS), append(b, m.Peak)
				}
			}
			return median(a), median(b)
		}
		p := paramInt(r.Params, "memoryPlugins")
		nr, np := pick("native", 0)
		hr, hp := pick("host", p)
		h2, _ := pick("host", 2*p)
		// The fair baseline holds the same objects as the daemon, which
		// strips managedFields; the old one, kept for comparison, holds
		// them as client-go does by default.
		if sr, sp := pick("native-stripped", 0); sr > 0 {
			r.add(row{"5 memory", fmt.Sprintf("RSS with %v cached ConfigMaps, %d Go plugins (peak)", r.Params["memoryN"], p),
				fmt.Sprintf("%.0f MiB (%.0f)", hr, hp), fmt.Sprintf("plain informer, managedFields stripped like the daemon: %.0f MiB (%.0f)", sr, sp),
				ratio(hr, sr), "≤ 1.2x", yes(hr/sr <= 1.2)})
			// A Pod's memory limit is set by the peak, not the settled
			// figure: the initial list and every plugin's replay at once.
			r.add(row{"5 memory", fmt.Sprintf("peak RSS (VmHWM) with %v cached ConfigMaps, %d Go plugins (settled)", r.Params["memoryN"], p),
				fmt.Sprintf("%.0f MiB (%.0f)", hp, hr), fmt.Sprintf("plain informer, managedFields stripped like the daemon: %.0f MiB (%.0f)", sp, sr),
				ratio(hp, sp), "≤ 1.25x", yes(hp/sp <= 1.25)})
		}
		r.add(row{"5 memory", fmt.Sprintf("RSS with %v cached ConfigMaps, %d Go plugins (peak); old baseline", r.Params["memoryN"], p),
			fmt.Sprintf("%.0f MiB (%.0f)", hr, hp), fmt.Sprintf("plain informer, managedFields kept (client-go's default): %.0f MiB (%.0f)", nr, np), ratio(hr, nr), "≤ 1.3x", yes(hr/nr <= 1.3)})
		per := (h2 - hr) / float64(max(p, 1))
		runs := r.morePluginRuns(p)
		host, met := fmt.Sprintf("%+.1f MiB", per), yes(per <= 6)
		if len(runs) > 0 {
			lo, hi := slices.Min(runs), slices.Max(runs)
			stable := hi-lo <= stableMiB
			host = fmt.Sprintf("%+.1f (%.1f–%.1f) MiB, %s", per, lo, hi, map[bool]string{true: "stable", false: "not stable"}[stable])
			met = yes(hi <= 6 && stable)
		}
		r.add(row{"5 memory", fmt.Sprintf("one more Go plugin (%d → %d plugins, over %d): difference of the medians (each run's own figure, lowest–highest)", p, 2*p, p),
			host, "", "", fmt.Sprintf("≤ 6 MiB in every run, stable: spread ≤ %.0f MiB", stableMiB), met})
		// The peak a relist costs (relist.go): VmHWM reset once settled,
		// read once the relist is done.
		if _, hp := pick("host-relist", p); hp > 0 {
			_, sp := pick("native-stripped-relist", 0)
			r.add(row{"5 memory", fmt.Sprintf("relist (watch cut + etcd compaction) at %v ConfigMaps, %d Go plugins: peak RSS (VmHWM) over the relist (410 from %s)",
				r.Params["memoryN"], p, r.relistCauses()),
				fmt.Sprintf("%.0f MiB", hp), fmt.Sprintf("plain informer, managedFields stripped like the daemon: %.0f MiB", sp),
				ratio(hp, sp), "≤ 1.25x", yes(sp > 0 && hp/sp <= 1.25)})
		}
		if cr, cp := pick("controllers", p); cr > 0 {
			r.add(row{"5 memory", fmt.Sprintf("RSS, %d Go plugins in one daemon vs %d separate native processes, each a plain informer, managedFields stripped (peak): %s (Wasm-operator, arXiv 2209.01077: 64%% less than container-based controllers)",
				p, p, lessOrMore(hr, cr)),
				fmt.Sprintf("%.0f MiB (%.0f)", hr, hp), fmt.Sprintf("one controller per handler: %.0f MiB (%.0f)", cr, cp), ratio(hr, cr), "", "—"})
		}
	}
	// The plugin's view of the cache (host/view.go), in process.
	if old, ok := ns("BenchmarkView/map", "B/object"); ok {
		for _, v := range []struct{ sub, what string }{
			{"first", "the first plugin's view (it interns the keys)"},
			{"more", "one more plugin's view over keys already interned"},
			{"sparse", "one more plugin's view holding 1 object in 100 (per object held)"},
		} {
			if b, ok := ns("BenchmarkView/"+v.sub, "B/object"); ok {
				r.add(row{"5 memory", "in process, 50,000 objects: " + v.what + ", B/object",
					fmt.Sprintf("%.1f B", b), fmt.Sprintf("the map per plugin it replaced: %.1f B", old), ratio(b, old), "", "—"})
			}
		}
	}

	// Case 5i: idle plugins.
	if len(r.Idle) > 0 {
		pick := func(n int, f func(memoryRun) float64) float64 {
			var a []float64
			for _, m := range r.Idle {
				if m.Plugins == n {
					a = append(a, f(m))
				}
			}
			return median(a)
		}
		rss := func(m memoryRun) float64 { return m.RSS }
		peak := func(m memoryRun) float64 { return m.Peak }
		one, all := pick(1, rss), pick(1+idlePlugins, rss)
		onePeak, allPeak := pick(1, peak), pick(1+idlePlugins, peak)
		r.add(row{"5i idle", fmt.Sprintf("%d idle Go plugins (10 unchanging ConfigMaps): RSS, and per idle plugin (peak)", idlePlugins),
			fmt.Sprintf("%.0f MiB; %+.1f MiB each (%.0f; %+.1f)", all, (all-one)/idlePlugins, allPeak, (allPeak-onePeak)/idlePlugins),
			fmt.Sprintf("1 plugin: %.0f MiB (%.0f)", one, onePeak), "", "", "—"})
	}

	r.scaleRows()

	// Case 6: isolation.
	if len(r.Isolation) > 0 {
		pick := func(sib string, f func(isolationRun) float64) float64 {
			var xs []float64
			for _, x := range r.Isolation {
				if x.Sibling == sib {
					xs = append(xs, f(x))
				}
			}
			return median(xs)
		}
		base := pick("none", func(x isolationRun) float64 { return x.P99 })
		r.add(row{"6 isolation", fmt.Sprintf("healthy plugin alone: latency p50 / p99 (100 changes/s; daemon %.2f cores)",
			pick("none", func(x isolationRun) float64 { return x.HostCPU })),
			fmtMs(pick("none", func(x isolationRun) float64 { return x.P50 })) + " / " + fmtMs(base), "", "", "", "—"})
		for _, sib := range []string{"trap", "spin", "hog"} {
			p99 := pick(sib, func(x isolationRun) float64 { return x.P99 })
			if p99 == 0 {
				continue
			}
			cores := pick(sib, func(x isolationRun) float64 { return x.HostCPU })
			var what, target, met string
			switch sib {
			case "trap":
				what = fmt.Sprintf("healthy plugin's p99 next to a sibling that traps (%.0f traps/s; daemon %.2f cores)",
					pick(sib, func(x isolationRun) float64 { return x.Traps }), cores)
				target, met = "≤ 1.2x", yes(p99/base <= 1.2)
			case "spin":
				what = fmt.Sprintf("healthy plugin's p99 next to a sibling that spins to its 1s deadline (%.1f kills/s; daemon %.2f cores)",
					pick(sib, func(x isolationRun) float64 { return x.Timeouts }), cores)
				target, met = "≤ 1.2x", yes(p99/base <= 1.2)
			case "hog":
				what = fmt.Sprintf("control: no sibling, another process spinning on one core (daemon %.2f cores)", cores)
				target, met = "", "—"
			}
			r.add(row{"6 isolation", fmt.Sprintf("%s; p50 %s", what, fmtMs(pick(sib, func(x isolationRun) float64 { return x.P50 }))),
				fmtMs(p99), "alone: " + fmtMs(base), ratio(p99, base), target, met})
		}
	}

	// Case 6r: a sibling restarting once a second.
	if len(r.Restart) > 0 {
		pick := func(sib string, f func(isolationRun) float64) float64 { return siblingMedian(r.Restart, sib, f) }
		p99 := func(x isolationRun) float64 { return x.P99 }
		base, got := pick("restart-none", p99), pick("restart", p99)
		r.add(row{"6r restart", fmt.Sprintf("healthy plugin's p99 next to a sibling restarted every second (%.1f restarts/s, each replaying %v objects; daemon %.2f cores); p50 %s",
			pick("restart", func(x isolationRun) float64 { return x.Traps }), paramInt(r.Params, "restartObjects")+20,
			pick("restart", func(x isolationRun) float64 { return x.HostCPU }), fmtMs(pick("restart", func(x isolationRun) float64 { return x.P50 }))),
			fmtMs(got), "alone, same objects: " + fmtMs(base), ratio(got, base), "≤ 1.2x", yes(got/base <= 1.2)})
	}
}

// relistCauses says whose 410 made the sides of case 5's relist runs
// list again: "the apiserver", "the proxy" or both.
func (r *results) relistCauses() string {
	seen := map[string]bool{}
	var out []string
	for _, m := range r.Memory {
		if m.Relist != "" && !seen[m.Relist] {
			seen[m.Relist] = true
			out = append(out, "the "+m.Relist)
		}
	}
	return strings.Join(out, " and ")
}

// stableMiB is the spread of "one more Go plugin" between the lowest and
// the highest run within which it counts as stable across runs.
const stableMiB = 1.0

// morePluginRuns is "one more Go plugin" in each run of case 5: the k-th
// daemon with 2p plugins less the k-th with p, over p (each run of the
// case starts one of each, so the k-th of each are from one run).
func (r *results) morePluginRuns(p int) []float64 {
	var one, two []float64
	for _, m := range r.Memory {
		switch {
		case m.Side == "host" && m.Plugins == p:
			one = append(one, m.RSS)
		case m.Side == "host" && m.Plugins == 2*p:
			two = append(two, m.RSS)
		}
	}
	var out []float64
	for k := range min(len(one), len(two)) {
		out = append(out, (two[k]-one[k])/float64(max(p, 1)))
	}
	return out
}

// siblingMedian is the median of f over the runs with sibling sib.
func siblingMedian(runs []isolationRun, sib string, f func(isolationRun) float64) float64 {
	var xs []float64
	for _, x := range runs {
		if x.Sibling == sib {
			xs = append(xs, f(x))
		}
	}
	return median(xs)
}

func (r *results) table() string {
	var b strings.Builder
	b.WriteString("| case | measure | informer-host | baseline | ratio | target | met |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", x.Case, x.What, x.Host, x.Base, x.Ratio, x.Target, x.Met)
	}
	return b.String()
}

// machine describes where the run happened.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
	}
	kernel := ""
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = ", " + strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d cores%s%s, %s", cpu, runtime.NumCPU(), mem, kernel, runtime.Version())
}
