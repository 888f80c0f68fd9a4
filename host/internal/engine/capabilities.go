package engine

import (
	"slices"
	"sort"

	"github.com/informer-host/informer-host/abi"
)

// Requested returns the capabilities the module requests: those of the
// host functions it imports (abi.CapabilityOf), sorted, each once. A
// module may import functions it is not granted; it loads, and their
// calls return ERR_DENIED.
func (m *Module) Requested() []string {
	var out []string
	for _, f := range m.c.cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != abi.ImportModule {
			continue
		}
		if c := abi.CapabilityOf(name); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}
