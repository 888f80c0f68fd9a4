package daemon

import (
	"context"
	"log/slog"
	"reflect"

	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
)

// reload reads the config file again and applies it: resources start and
// stop, plugins whose settings changed are reloaded, the endpoint counts
// the new resources' events. An invalid file is refused with the same
// file:line messages as validate, and the running configuration stays;
// settings that take effect only after a restart are named and left as
// they run.
func (d *Daemon) reload(ctx context.Context, why string) {
	file, err := config.Load(d.cfg.File)
	if err != nil {
		d.log.Error("config not reloaded: the running configuration stays", "reason", why, "problems", err.Error())
		return
	}
	next := d.merged(ctx, file)
	if next.PluginDir() != d.cfg.PluginDir() || next.Kubeconfig != d.cfg.Kubeconfig || next.Server != d.cfg.Server {
		d.log.Warn("plugins.directory, kubeconfig and server take effect only after a restart")
	}
	if d.sources != nil && d.sources.m != nil && (!reflect.DeepEqual(next.Plugins.Registries, d.cfg.Plugins.Registries) ||
		next.Plugins.DockerConfig != d.cfg.Plugins.DockerConfig || next.Plugins.AllowInsecureRemote != d.cfg.Plugins.AllowInsecureRemote ||
		next.Plugins.SourceCache != d.cfg.Plugins.SourceCache || next.FetchTimeoutOrDefault() != d.cfg.FetchTimeoutOrDefault()) {
		d.log.Warn("plugins.registries, dockerConfig, allowInsecureRemote, sourceCache and fetchTimeout take effect only after a restart")
	}
	if next.Sharding != d.cfg.Sharding || next.LeaderElection != d.cfg.LeaderElection {
		d.log.Warn("sharding and leaderElection take effect only after a restart")
	}
	d.fileCfg = file
	d.apply(ctx, next, why)
}

// resourcesChanged applies the file's configuration as it was last read
// with the plugin objects' modules as they are now.
func (d *Daemon) resourcesChanged(ctx context.Context) {
	d.apply(ctx, d.merged(ctx, d.fileCfg), "plugin objects changed")
}

// apply makes the daemon run next (the file's configuration merged with
// the plugin objects' modules).
func (d *Daemon) apply(ctx context.Context, next *config.Config, why string) {
	if err := d.pipeline.Apply(ctx, next.Resources); err != nil {
		d.log.Error("config reload: resources", "err", err)
		return
	}
	warnResources(d.log, next, d.pipeline)
	if err := d.host.ApplyConfig(ctx, next); err != nil {
		d.log.Error("config reload: some plugins keep their previous settings", "err", err)
	}
	// After the host has the new settings: a source that changed loads
	// its version under them; a removed one unloads its plugin, and the
	// directory watch's next look loads a file of that name, if any.
	if d.sources != nil {
		if err := d.sources.apply(next); err != nil {
			d.log.Error("config reload: plugin sources", "err", err)
		}
	}
	if d.server != nil {
		if err := d.server.SetResources(resourceNames(next)); err != nil {
			d.log.Error("config reload: event counters", "err", err)
		}
	}
	d.cfg = next
	if d.resources != nil {
		d.resources.Applied()
	}
	d.log.Info("config reloaded", "reason", why, "resources", len(next.Resources), "modules", len(next.Plugins.Modules))
}

// warnResources names, at their entries in the config file, the
// resources Apply left pending, with why (for one the apiserver does not
// serve, the nearest ones it does), and those it watches under another
// name than written. A typo would otherwise show only as a resource that
// never starts. Apply resolves what it adds before it returns, so all of
// that is known by now.
func warnResources(log *slog.Logger, cfg *config.Config, p *informer.Pipeline) {
	for _, st := range p.Status() {
		switch {
		case st.Phase == informer.PhasePending && st.Error != "":
			log.Warn("configured resource is pending: it starts once the apiserver serves it",
				"resource", st.Name, "problem", cfg.ResourceProblem(st.Name, "%s", st.Error).String())
		case st.Warning != "":
			log.Warn("configured resource is watched under another name than written",
				"resource", st.Name, "problem", cfg.ResourceProblem(st.Name, "%s", st.Warning).String())
		}
	}
}

func resourceNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Resources))
	for _, r := range cfg.Resources {
		names = append(names, r.Name)
	}
	return names
}
