package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/informer-host/informer-host/host/inspect"
)

// inspectCommand describes a plugin module and exits 1 when this host
// would not load it.
func inspectCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	startTimeout := fs.Duration("start-timeout", 10*time.Second, "how long the start functions, _initialize and ih_init may take, as in run")
	var rf registryFlags
	rf.register(fs)
	path, code, ok := parseOneArg(fs, args, stderr, "usage: informer-host inspect [--json] [--docker-config FILE] [--insecure] [--timeout D] X.wasm|oci://registry/repository:tag")
	if !ok {
		return code
	}
	if ociRef(path) {
		return inspectRemote(ctx, path, rf, *asJSON, inspect.Options{StartTimeout: *startTimeout}, stdout, stderr)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "informer-host inspect: %v\n", err)
		return 1
	}
	r, err := inspect.Module(ctx, path, wasm, inspect.Options{StartTimeout: *startTimeout})
	if err != nil {
		fmt.Fprintf(stderr, "informer-host inspect: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
	} else {
		printInspect(stdout, r)
	}
	if !r.Loads {
		return 1
	}
	return 0
}

func printInspect(w io.Writer, r *inspect.Report) {
	fmt.Fprintf(w, "plugin:     %s\n", r.Plugin)
	vs := make([]string, len(r.ABIVersions))
	for i, v := range r.ABIVersions {
		vs[i] = fmt.Sprintf("v%d", v)
	}
	if len(vs) == 0 {
		vs = []string{"none declared"}
	}
	fmt.Fprintf(w, "ABI:        %s (this host speaks v%d)\n", strings.Join(vs, ", "), r.HostABI)
	caps := strings.Join(r.Requested, ", ")
	if caps == "" {
		caps = "none"
	}
	fmt.Fprintf(w, "requests:   %s\n", caps)
	fmt.Fprintln(w, "exports:")
	for _, x := range r.Exports {
		fmt.Fprintf(w, "  %-24s %s %s\n", x.Name, x.Kind, x.Signature)
	}
	fmt.Fprintln(w, "imports:")
	for _, x := range r.Imports {
		line := fmt.Sprintf("  %-44s %s %s", x.Module+"."+x.Name, x.Kind, x.Signature)
		if x.Capability != "" {
			line += " [" + x.Capability + "]"
		}
		fmt.Fprintln(w, line)
	}
	for _, x := range r.Warnings {
		fmt.Fprintln(w, "warning:", x)
	}
	if r.Loads {
		fmt.Fprintln(w, "loads:      yes")
		return
	}
	fmt.Fprintf(w, "loads:      no, %d problem(s):\n", len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  -", p)
	}
	for _, h := range r.Hints {
		fmt.Fprintln(w, "  what to do:", h)
	}
}
