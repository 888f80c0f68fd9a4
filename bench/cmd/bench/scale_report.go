package main

import "fmt"

// scaleRows adds case 11's rows: one per plugin count, its ratio to the
// first count's (the baseline of the same run), and what one more plugin
// cost between the count before and this one.
func (r *results) scaleRows() {
	if len(r.Scale) == 0 {
		return
	}
	base := r.Scale[0]
	ratio := func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	for i, s := range r.Scale {
		r.add(row{"11 plugins", fmt.Sprintf("%d plugins (Go/Rust/C), %d ConfigMaps: start cold / warm to synced; RSS settled (peak); p99 at %d updates/s; CPU per update",
			s.Plugins, s.Objects, s.Rate),
			fmt.Sprintf("%.1f / %.1f s; %.0f MiB (%.0f); %s; %.2f ms", s.Cold, s.Warm, s.RSS, s.Peak, fmtMs(s.P99), s.CPU),
			fmt.Sprintf("%d plugins: %.0f MiB", base.Plugins, base.RSS), ratio(s.RSS, base.RSS), "", "—"})
		if i == 0 {
			continue
		}
		prev := r.Scale[i-1]
		dp := float64(s.Plugins - prev.Plugins)
		if dp <= 0 {
			continue
		}
		r.add(row{"11 plugins", fmt.Sprintf("one more plugin, %d → %d: RSS (peak); cold start; CPU per update", prev.Plugins, s.Plugins),
			fmt.Sprintf("%+.2f MiB (%+.2f); %+.3f s; %+.3f ms", (s.RSS-prev.RSS)/dp, (s.Peak-prev.Peak)/dp, (s.Cold-prev.Cold)/dp, (s.CPU-prev.CPU)/dp),
			"", "", "", "—"})
	}
}
