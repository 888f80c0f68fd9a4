package main

import "fmt"

// peerRows adds case 8's rows: each peer next to the daemon measured in
// the same rounds with as many handlers (informer-host over the peer).
func (r *results) peerRows() {
	if len(r.Peers) == 0 {
		return
	}
	pick := func(side string, f func(throughputRun) float64) (float64, bool) {
		var xs []float64
		for _, t := range r.Peers {
			if t.Side == side {
				xs = append(xs, f(t))
			}
		}
		return median(xs), len(xs) > 0
	}
	rates := func(side string) (string, float64) {
		var s string
		var sum float64
		for i, ph := range phases {
			v, _ := pick(side, func(t throughputRun) float64 { return t.Rate[ph] })
			if i > 0 {
				s += " / "
			}
			s += fmt.Sprintf("%.0f", v)
			sum += v
		}
		return s, sum / float64(len(phases))
	}
	n := r.Params["peersN"]
	plugins := paramInt(r.Params, "peersPlugins")
	for _, c := range []struct {
		host, peer, hostWhat, peerWhat string
	}{
		{"host-1", "shell-operator", "1 Go plugin (twofields)",
			"shell-operator " + shellOperatorVersion + ", 1 hook: bash + jq reading the same two fields (its queue hands a hook every waiting event at once)"},
		{"host", "controllers", fmt.Sprintf("%d Go plugins", plugins),
			fmt.Sprintf("%d separate native client-go processes, each a dynamic informer + 1 handler reading the two fields", plugins)},
		{"host", "shell-operator-n", fmt.Sprintf("%d Go plugins", plugins),
			fmt.Sprintf("shell-operator %s, %d copies of the hook", shellOperatorVersion, plugins)},
	} {
		if _, ok := pick(c.peer, func(throughputRun) float64 { return 0 }); !ok {
			continue
		}
		if _, ok := pick(c.host, func(throughputRun) float64 { return 0 }); !ok {
			continue
		}
		label := "8 " + c.peer
		hr, hm := rates(c.host)
		pr, pm := rates(c.peer)
		r.add(row{label, fmt.Sprintf("%v ConfigMaps, create / update / delete events/s; daemon with %s vs %s", n, c.hostWhat, c.peerWhat),
			hr, pr, ratio(hm, pm), "", "—"})
		for _, m := range []struct {
			what string
			f    func(throughputRun) float64
			fmt  func(float64) string
		}{
			{"delivery latency p50 (write sent → handler entered; a hook: its run began)", func(t throughputRun) float64 { return t.P50 }, fmtMs},
			{"delivery latency p99", func(t throughputRun) float64 { return t.P99 }, fmtMs},
			{"CPU per event, every process of the side (utime+stime; a hook's bash and jq included)", func(t throughputRun) float64 { return t.CPU }, fmtMs},
			{"peak RSS during the workload, every process of the side summed (sampled every 100 ms)", func(t throughputRun) float64 { return t.RSS },
				func(v float64) string { return fmt.Sprintf("%.0f MiB", v) }},
			{"ConfigMap watches held open on the apiserver (apiserver_longrunning_requests)", func(t throughputRun) float64 { return float64(t.Watches) },
				func(v float64) string { return fmt.Sprintf("%.0f", v) }},
		} {
			h, _ := pick(c.host, m.f)
			p, _ := pick(c.peer, m.f)
			base := m.fmt(p)
			if c.peer != "controllers" && m.what[:3] == "CPU" {
				ch, _ := pick(c.peer, func(t throughputRun) float64 { return t.CPUChild })
				base += fmt.Sprintf(" (hooks %s)", fmtMs(ch))
			}
			r.add(row{label, m.what, m.fmt(h), base, ratio(h, p), "", "—"})
		}
		if c.peer == "controllers" {
			h, _ := pick(c.host, func(t throughputRun) float64 { return t.RSS })
			p, _ := pick(c.peer, func(t throughputRun) float64 { return t.RSS })
			if p > 0 {
				r.add(row{label, "peak RSS of one daemon against one controller per handler (Wasm-operator, arXiv 2209.01077: 64% less memory than container-based controllers)",
					lessOrMore(h, p), "", "", "", "—"})
			}
		}
	}
}

// lessOrMore says how much less (or more) h is than base, in percent.
func lessOrMore(h, base float64) string {
	if h > base {
		return fmt.Sprintf("%.0f%% more", 100*(h/base-1))
	}
	return fmt.Sprintf("%.0f%% less", 100*(1-h/base))
}
