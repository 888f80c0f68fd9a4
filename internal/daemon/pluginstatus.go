package daemon

import (
	"context"
	"os"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/pluginstatus"
)

// startPluginStatus starts the writer of the plugin objects' status
// (internal/pluginstatus) when they are watched, until ctx ends. Under
// leader election only the leader writes (a standby writes nothing) and
// keeps its own entry; a shard member keeps the entries of the group's
// live members beside its own. A writer that cannot be made is logged:
// the plugins run all the same.
func (d *Daemon) startPluginStatus(ctx context.Context, wg *sync.WaitGroup, restCfg *rest.Config, el election) {
	if d.resources == nil {
		return
	}
	h := d.host
	o := pluginstatus.Options{RESTConfig: restCfg, Logger: d.log, Plugins: h.Status, Admissions: d.resources.Admissions,
		Standby: h.Standby, StatusInterval: d.cfg.PluginResources.StatusInterval.Duration,
		// The sources' manager is made by the first config that names a
		// source, which may be a reload that plugin objects caused.
		Sources: func() map[string]pluginsource.Status {
			if m := d.sources.cur.Load(); m != nil {
				return m.Status()
			}
			return nil
		}}
	switch e := el.(type) {
	case *leader:
		o.Replica = e.id
	case *member:
		if a := h.Assignment(); a != nil {
			o.Replica = a.Self
		}
		o.Members = func() []string {
			if a := h.Assignment(); a != nil {
				return a.Members
			}
			return nil
		}
	}
	if o.Replica == "" {
		o.Replica, _ = os.Hostname()
	}
	if o.Replica == "" {
		o.Replica = "informer-host"
	}
	w, err := pluginstatus.New(o)
	if err != nil {
		d.log.Error("plugin objects' status is not written", "err", err)
		return
	}
	wg.Go(func() { w.Run(ctx) })
}
