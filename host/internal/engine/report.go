package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/wasmbin"
)

// Extern is one import or export of a module, for Inspect.
type Extern struct {
	Module string `json:"module,omitempty"` // imports only
	Name   string `json:"name"`
	// Kind: function, table, memory, global or tag.
	Kind string `json:"kind"`
	// Signature of a function, "(i32, i32) -> i32".
	Signature string `json:"signature,omitempty"`
	// Capability a host function needs (abi.CapabilityOf), if any.
	Capability string `json:"capability,omitempty"`
}

// Report is what Inspect learns about a module.
type Report struct {
	// ABIVersions are the versions the module's marker exports and
	// import modules name; this host speaks abi.Version.
	ABIVersions []int    `json:"abiVersions"`
	Imports     []Extern `json:"imports"`
	Exports     []Extern `json:"exports"`
	// Requested are the capabilities of the host functions it imports.
	Requested []string `json:"requested"`
	// Problems are every reason this host refuses to load it, each saying
	// what to do; none means it loads.
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings,omitempty"`
}

// Inspect describes wasm and, unless its imports and exports already rule
// it out, loads it as the daemon would (compilation, start functions
// under the start timeout, with a call deadline) to find every reason it
// would be refused.
func (e *Engine) Inspect(ctx context.Context, name string, wasm []byte) *Report {
	r := &Report{}
	info, err := wasmbin.Decode(wasm)
	if err != nil {
		r.Problems = []string{err.Error()}
		return r
	}
	seen := map[int]bool{}
	version := func(n int) {
		if !seen[n] {
			seen[n] = true
			r.ABIVersions = append(r.ABIVersions, n)
		}
	}
	for _, im := range info.Imports {
		x := Extern{Module: im.Module, Name: im.Name, Kind: wasmbin.ExternName(im.Kind)}
		if im.Kind == wasmbin.ExternFunc {
			if s, ok := info.TypeSig(im.TypeIdx); ok {
				x.Signature = s.String()
			}
			if im.Module == abi.ImportModule {
				x.Capability = abi.CapabilityOf(im.Name)
				if x.Capability != "" && !slices.Contains(r.Requested, x.Capability) {
					r.Requested = append(r.Requested, x.Capability)
				}
			}
		}
		if n, ok := versionSuffix(im.Module, abi.ImportModulePrefix); ok {
			version(n)
		}
		r.Imports = append(r.Imports, x)
	}
	for _, ex := range info.Exports {
		x := Extern{Name: ex.Name, Kind: wasmbin.ExternName(ex.Kind)}
		if ex.Kind == wasmbin.ExternFunc {
			if s, ok := info.FuncSig(ex.Index); ok {
				x.Signature = s.String()
			}
		}
		if n, ok := versionSuffix(ex.Name, abi.MarkerExportPrefix); ok {
			version(n)
		}
		r.Exports = append(r.Exports, x)
	}
	r.Problems, r.Warnings = checkABI(info, e.wasiSigs)
	if len(r.Problems) > 0 {
		return r
	}
	m, err := e.Load(ctx, name, wasm, Limits{CallTimeout: time.Second})
	if err != nil {
		var le *LoadError
		if errors.As(err, &le) {
			r.Problems = append(r.Problems, le.Problems...)
		} else {
			r.Problems = append(r.Problems, strings.TrimPrefix(err.Error(), "plugin \""+name+"\": "))
		}
		return r
	}
	defer m.Close(ctx)
	inst, err := m.Instantiate(ctx, InstanceOptions{Logger: slog.New(slog.DiscardHandler)})
	switch {
	case errors.Is(err, ErrRefused):
		r.Warnings = append(r.Warnings, "ih_init refuses an empty configuration (give the plugin its config): "+
			strings.TrimPrefix(err.Error(), "plugin \""+name+"\": "))
	case err != nil:
		r.Problems = append(r.Problems, strings.TrimPrefix(err.Error(), "plugin \""+name+"\": "))
	default:
		_ = inst.Close(ctx)
	}
	return r
}
