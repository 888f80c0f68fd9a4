package inspect

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/engine"
)

// Extern is an import or export.
type Extern = engine.Extern

// Report describes one module.
type Report struct {
	Plugin string `json:"plugin"`
	// HostABI is the ABI version this host speaks.
	HostABI int `json:"hostABI"`
	engine.Report
	// Loads is whether this host loads the module.
	Loads bool `json:"loads"`
	// Hints say what to do about the problems, beyond what each says.
	Hints []string `json:"hints,omitempty"`
}

// Options configure an inspection.
type Options struct {
	// StartTimeout bounds the start functions, _initialize and ih_init,
	// as the daemon's --start-timeout does; zero selects its default.
	StartTimeout time.Duration
}

// Module inspects wasm, named name in messages.
func Module(ctx context.Context, name string, wasm []byte, o Options) (*Report, error) {
	eng, err := engine.New(ctx, engine.Options{Logger: slog.New(slog.DiscardHandler), StartTimeout: o.StartTimeout})
	if err != nil {
		return nil, err
	}
	defer eng.Close(context.Background())
	r := &Report{Plugin: filepath.Base(name), HostABI: abi.Version, Report: *eng.Inspect(ctx, filepath.Base(name), wasm)}
	r.Loads = len(r.Problems) == 0
	for _, h := range hints {
		for _, p := range r.Problems {
			if strings.Contains(p, h.match) {
				r.Hints = append(r.Hints, h.hint)
				break
			}
		}
	}
	return r, nil
}

// hints add to a problem what its message cannot say: where the tools
// that fix it are.
var hints = []struct{ match, hint string }{
	{`"env"."abort"`, "AssemblyScript: build with the kit's abort (abi/assemblyscript, npm package informer-host-as), which logs " +
		"the message and where, then traps: `asc ... --use abort=~lib/informer-host-as/assembly/index/abort`; or with " +
		"`--use abort=` alone (an abort traps without a message); `informer-host new --lang assemblyscript` sets this up"},
	{"missing required export " + abi.MarkerExport, "every plugin exports " + abi.MarkerExport + "(): Go gets it from abi/kit " +
		"(import it), C from abi/include/informer_host.h (IH_ABI_V1()), WAT by `(func (export \"" + abi.MarkerExport + "\"))`"},
	{"which ABI v1 does not define", "the host functions of ABI v1 are listed in abi/ABI.md §6; a function from a newer minor version " +
		"needs a newer informer-host"},
	{"so it is a WASI command", "Go: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared; clang: -mexec-model=reactor; " +
		"Rust: crate-type = [\"cdylib\"]"},
	{"this host speaks v", "rebuild the plugin against this host's kit (abi/kit, abi/include) or run a host that speaks its version"},
	{"exceeded its", "a start function, _initialize or ih_init that runs past the start timeout: move slow work out of " +
		"initialisation (the host's start timeout is 10s by default)"},
}
