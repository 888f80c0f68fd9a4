package main

import "fmt"

// convergeRows adds case 9's rows: the plugin next to the native
// controller of the same run, then each disrupted halfway (a reload of the
// plugin, a restart of the native process), whose cost is its time and
// CPU over the undisturbed side's.
func (r *results) convergeRows() {
	if len(r.Converge) == 0 {
		return
	}
	pick := func(side string, f func(convergeRun) float64) (float64, bool) {
		var xs []float64
		for _, c := range r.Converge {
			if c.Side == side {
				xs = append(xs, f(c))
			}
		}
		return median(xs), len(xs) > 0
	}
	seconds := func(c convergeRun) float64 { return c.Seconds }
	n := r.Params["convergeN"]
	limit := fmt.Sprintf("writes limited to %v/s, burst %v on both sides", r.Params["convergeQPS"], r.Params["convergeBurst"])
	nativeWhat := "native controller (bench native-labeler, own process): informer-factory listers, client-go workqueue with DefaultTypedControllerRateLimiter, 1 worker, the same apply"
	plain := func(side string) bool { _, ok := pick(side, seconds); return ok }

	requests := func(side string) (string, float64) {
		t, _ := pick(side, func(c convergeRun) float64 { return float64(c.Requests) })
		p, _ := pick(side, func(c convergeRun) float64 { return float64(c.Writes) })
		return fmt.Sprintf("%.0f (%.0f)", t, p), t
	}

	// The measures with a target, both for the plain sides and for the
	// disrupted ones. CPU counts the daemon's compile child (a reload's)
	// with the daemon: a container's cgroup counts both.
	cpuAll := func(c convergeRun) float64 { return c.CPU + c.ChildCPU }
	measures := []struct {
		what, short, target string
		bound               float64 // the plain sides' target ratio; 0: none
		reloadBound         float64 // the disrupted sides': reload cost ≤ restart cost + reloadBound
		f                   func(convergeRun) float64
	}{
		{"time from the process's start to every Pod labelled", "time to every Pod labelled", "≤ 1.2x", 1.2, 0, seconds},
		{"CPU until then (utime+stime; a compile child's included)", "CPU, a compile child's included", "≤ 1.3x", 1.3, 0.5, cpuAll},
		{"longest pause between two Pods labelled in the second half", "longest pause in labelling after N/2", "", 0, 0, func(c convergeRun) float64 { return c.Stall }},
	}

	if plain("host") && plain("native") {
		for _, m := range measures {
			h, _ := pick("host", m.f)
			b, _ := pick("native", m.f)
			met := "—"
			if m.bound > 0 {
				met = yes(h <= m.bound*b)
			}
			r.add(row{"9 converge", fmt.Sprintf("%v Pods, owner chain from the cache, server-side apply, %s: %s", n, limit, m.what),
				fmtS(h), nativeWhat + ": " + fmtS(b), ratio(h, b), m.target, met})
		}
		h, _ := pick("host", func(c convergeRun) float64 { return c.RSS })
		b, _ := pick("native", func(c convergeRun) float64 { return c.RSS })
		r.add(row{"9 converge", fmt.Sprintf("%v Pods, team-labeler: peak RSS (VmHWM)", n), fmtMiB(h), fmtMiB(b), ratio(h, b), "≤ 1.25x", yes(h <= 1.25*b)})
		hs, hv := requests("host")
		bs, bv := requests("native")
		r.add(row{"9 converge", fmt.Sprintf("%v Pods, team-labeler: apiserver requests on Pods, ReplicaSets, Deployments, watches (which also list) included (of which APPLY/PATCH)", n),
			hs, bs, ratio(hv, bv), "", "—"})
	}
	if !(plain("host") && plain("native") && plain("host-reload") && plain("native-restart")) {
		return
	}
	for _, m := range measures {
		h0, _ := pick("host", m.f)
		h1, _ := pick("host-reload", m.f)
		n0, _ := pick("native", m.f)
		n1, _ := pick("native-restart", m.f)
		hc, nc := h1-h0, n1-n0
		reloaded, _ := pick("host-reload", func(c convergeRun) float64 { return c.Reloaded })
		target, met := "reload cost < restart cost", yes(hc < nc)
		if m.reloadBound > 0 {
			target, met = fmt.Sprintf("reload cost ≤ restart cost + %.1f s", m.reloadBound), yes(hc <= nc+m.reloadBound)
		}
		r.add(row{"9 converge, disrupted",
			fmt.Sprintf("%v Pods, halfway (at %d labelled) the plugin's file replaced by new bytes vs the native process stopped and started again: %s (cost: over the undisturbed side)",
				n, paramInt(r.Params, "convergeN")/2, m.short),
			fmt.Sprintf("%s (%+.2f s; new version loaded at %s)", fmtS(h1), hc, fmtS(reloaded)), fmt.Sprintf("native restarted: %s (%+.2f s)", fmtS(n1), nc),
			ratio(h1, n1), target, met})
	}
	// A container holds the daemon and its compile child at once, so the
	// pod's peak is at most their sum; the native restart's two processes
	// never overlap, so its peak is the larger.
	hp, _ := pick("host-reload", func(c convergeRun) float64 { return c.RSS })
	hcp, _ := pick("host-reload", func(c convergeRun) float64 { return c.ChildRSS })
	np, _ := pick("native-restart", func(c convergeRun) float64 { return c.RSS })
	r.add(row{"9 converge, disrupted", fmt.Sprintf("%v Pods, reload vs restart: peak RSS (VmHWM), the daemon + its compile child's own peak (their sum bounds the pod's)", n),
		fmt.Sprintf("%s + %s", fmtMiB(hp), fmtMiB(hcp)), fmt.Sprintf("native restarted (the larger process): %s", fmtMiB(np)), ratio(hp+hcp, np), "≤ 1.25x", yes(hp+hcp <= 1.25*np)})
	hs, hv := requests("host-reload")
	bs, bv := requests("native-restart")
	r.add(row{"9 converge, disrupted", fmt.Sprintf("%v Pods, reload vs restart: apiserver requests (APPLY/PATCH)", n), hs, bs, ratio(hv, bv), "", "—"})
}

func fmtS(s float64) string { return fmt.Sprintf("%.2f s", s) }

func fmtMiB(m float64) string { return fmt.Sprintf("%.0f MiB", m) }
