package host

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/internal/stateport"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/state"
)

// openState opens the plugins' key-value state as plugins.state says. A
// file it cannot use is reported by the store, which then runs in memory,
// and a corrupt one is moved aside and started afresh: state is never a
// reason for the host not to start. A corrupt file is reported in the log
// (by the store, at error level, with the reason and where the file went)
// and counted in informer_host_state_file_corrupt_total; no Event, as the
// host has no Event recorder of its own, only the plugins'.
func openState(ctx context.Context, cfg *config.Config, h *Host) (*state.Store, error) {
	return state.Open(ctx, state.Options{Path: cfg.StatePath(), FlushInterval: cfg.StateFlushInterval(), Logger: h.log})
}

var descStateCorrupt = prometheus.NewDesc("informer_host_state_file_corrupt_total",
	"Plugin state files found corrupt at start (or empty, or truncated), moved aside to <path>.corrupt-<time>; every plugin then started with empty state.",
	nil, nil)

func describeState(ch chan<- *prometheus.Desc) { ch <- descStateCorrupt }

func (h *Host) collectState(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descStateCorrupt, prometheus.CounterValue, float64(h.state.CorruptFiles()))
}

// stateFor returns the bucket of plugin name for an instance with the
// given settings, or nil (an untyped nil: the engine tests for nil) when
// the settings do not grant state. The bucket is the same for every
// instance and version of the file, so state survives traps, restarts
// and reloads; the grant's quota is applied on each call. A store failure
// the ABI has no code for is logged to log, the plugin's logger.
func (h *Host) stateFor(name string, s config.PluginSettings, log *slog.Logger) engine.StateBucket {
	g := s.Grants.State
	if g == nil {
		return nil
	}
	maxBytes, maxKeys := g.Limits()
	return stateport.New(h.state.Bucket(name, state.Quota{MaxBytes: maxBytes, MaxKeys: maxKeys}), log)
}

// removed unloads the plugin of a file that is gone and drops its state,
// unless plugins.state.keepOnRemove says to keep it. The drop happens
// under the file's load lock, so a file of the same name that reappears
// meanwhile is either loaded after it (and starts empty) or already loaded
// (and keeps the state). A controller with onRemove: release has its
// finalizer released from its objects.
func (h *Host) removed(ctx context.Context, name string) {
	release := finalizerRelease(h, name)
	h.unload(ctx, name)
	if release != nil {
		release(ctx)
	}
	if h.config().Plugins.State.KeepOnRemove {
		return
	}
	unlock := h.lockFile(name)
	defer unlock()
	h.mu.Lock()
	_, back := h.slots[name]
	h.mu.Unlock()
	if !back {
		h.state.Drop(name)
	}
}

// closeState writes the plugins' state to its file and closes it. Stop
// calls it after every plugin stopped, so nothing a plugin stored is lost
// on a graceful stop.
func (h *Host) closeState(ctx context.Context) {
	if err := h.state.Close(ctx); err != nil {
		h.log.Error("plugin state not fully written to its file", "path", h.config().StatePath(), "err", err)
	}
}
