package host

import (
	"log/slog"

	"github.com/informer-host/informer-host/internal/config"
)

// onDenied returns the engine's OnDenied for plugin: every refusal is
// counted; the log line is written once a minute per plugin and reason,
// with the number suppressed since, because a plugin that is refused once
// is usually refused on every event.
func (h *Host) onDenied(plugin string, log *slog.Logger) func(capability, function string) {
	return func(capability, function string) {
		h.metrics.denied.WithLabelValues(plugin, capability).Inc()
		if ok, n := h.denials.Allow(plugin + "\x00" + capability + "\x00" + function); ok {
			log.Warn("host function call denied: the capability is not granted to this plugin (grants in config.yaml)",
				"capability", capability, "function", function, "suppressed", n)
		}
	}
}

// ungranted returns the requested capabilities g does not grant.
func ungranted(requested []string, g config.Grants) []string {
	granted := g.Granted()
	var out []string
	for _, c := range requested {
		if !contains(granted, c) {
			out = append(out, c)
		}
	}
	return out
}

// warnUngranted warns about each capability the module imports functions
// of without a grant. The module still loads: the calls return ERR_DENIED.
func warnUngranted(log *slog.Logger, requested []string, g config.Grants) {
	for _, c := range ungranted(requested, g) {
		log.Warn("plugin imports functions of a capability it is not granted; it loads, and their calls return ERR_DENIED",
			"capability", c, "hint", "grant it under plugins.modules[].grants in config.yaml")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
