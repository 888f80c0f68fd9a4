package rbacgen

import (
	"fmt"
	"strings"

	"github.com/informer-host/informer-host/internal/config"
)

// configMapSources adds get on the ConfigMap of each configmap:// source
// to the RBAC of whoever reads it: internal/pluginsource reads as the
// module's grants.impersonate ServiceAccount when it has one (so that
// identity needs it, and the daemon does not), else as the daemon.
func (b *builder) configMapSources(cfg *config.Config, idents map[[2]string]*builder) {
	for _, m := range cfg.Plugins.Modules {
		if m.Source == "" {
			continue
		}
		ref, err := config.ParseSource(m.Source, "")
		if err != nil || ref.Scheme != config.SchemeConfigMap {
			continue
		}
		reader := b
		if imp := m.Grants.Impersonate; imp != nil {
			ns, name, _ := strings.Cut(imp.ServiceAccount, "/")
			if ib := idents[[2]string{ns, name}]; ib != nil {
				reader = ib
			}
		}
		reader.add([]string{ref.Namespace}, "", []string{"configmaps"}, []string{"get"}, []string{ref.Name},
			fmt.Sprintf("plugin %q reads its module from %s", m.File, m.Source))
	}
}
