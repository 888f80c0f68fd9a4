package main

import "fmt"

// copyRows adds case 10's rows: the plugin next to the controller-runtime
// controller of the same run, medians per side. A side not measured (the
// plugin before its example exists) shows "not measured", and the run's
// errors say why.
func (r *results) copyRows() {
	if r.Copy == nil {
		return
	}
	pick := func(side string, f func(copyRun) float64) (float64, bool) {
		var xs []float64
		for _, c := range r.Copy.Runs {
			if c.Side == side {
				xs = append(xs, f(c))
			}
		}
		return median(xs), len(xs) > 0
	}
	n := r.Params["copyN"]
	what := fmt.Sprintf("ConfigMap copy controller, %v sources (writes limited to %v/s, burst %v on both sides)", n, r.Params["copyQPS"], r.Params["copyBurst"])
	base := "controller-runtime (bench/crcopy: builder For + Watches with a map function, CreateOrPatch, own process)"
	measures := []struct {
		what   string
		f      func(copyRun) float64
		format func(float64) string
	}{
		{"time to converge, all three phases", copyRun.seconds, fmtS},
		{"time to converge: initial (process start to every copy made)", func(c copyRun) float64 { return c.Initial }, fmtS},
		{"time to converge: every source updated", func(c copyRun) float64 { return c.Update }, fmtS},
		{"time to converge: every other source deleted", func(c copyRun) float64 { return c.Delete }, fmtS},
		{"CPU over the three phases (utime+stime)", func(c copyRun) float64 { return c.CPU }, fmtS},
		{"peak RSS (VmHWM)", func(c copyRun) float64 { return c.RSS }, fmtMiB},
		{"HTTP requests to the apiserver, counted by a proxy (reads/watches/writes)", func(c copyRun) float64 { return float64(c.Requests.total()) }, nil},
	}
	for _, m := range measures {
		h, hok := pick(sidePlugin, m.f)
		b, bok := pick(sideCR, m.f)
		if !bok {
			continue
		}
		hs, bs := "not measured", ""
		if m.format == nil {
			reads, _ := pick(sideCR, func(c copyRun) float64 { return float64(c.Requests.Reads) })
			watches, _ := pick(sideCR, func(c copyRun) float64 { return float64(c.Requests.Watches) })
			writes, _ := pick(sideCR, func(c copyRun) float64 { return float64(c.Requests.Writes) })
			bs = fmt.Sprintf("%.0f (%.0f/%.0f/%.0f)", b, reads, watches, writes)
			if hok {
				reads, _ := pick(sidePlugin, func(c copyRun) float64 { return float64(c.Requests.Reads) })
				watches, _ := pick(sidePlugin, func(c copyRun) float64 { return float64(c.Requests.Watches) })
				writes, _ := pick(sidePlugin, func(c copyRun) float64 { return float64(c.Requests.Writes) })
				hs = fmt.Sprintf("%.0f (%.0f/%.0f/%.0f)", h, reads, watches, writes)
			}
		} else {
			bs = m.format(b)
			if hok {
				hs = m.format(h)
			}
		}
		rt := "—"
		if hok {
			rt = ratio(h, b)
		}
		r.add(row{"10 controller", what + ": " + m.what, hs, base + ": " + bs, rt, "", "—"})
	}
	lines := func(side string) (string, int, bool) {
		l, ok := r.Copy.Lines[side]
		if !ok {
			return "not measured", 0, false
		}
		if l.YAML == 0 {
			return fmt.Sprintf("%d (Go)", l.Go), l.total(), true
		}
		return fmt.Sprintf("%d (%d Go + %d YAML config)", l.total(), l.Go, l.YAML), l.total(), true
	}
	hs, hv, hok := lines(sidePlugin)
	bs, bv, bok := lines(sideCR)
	if !bok {
		return
	}
	rt := "—"
	if hok {
		rt = ratio(float64(hv), float64(bv))
	}
	r.add(row{"10 controller", "ConfigMap copy controller: lines of code (non-blank, non-comment; tests not counted)", hs, base + ": " + bs, rt, "", "—"})
}
