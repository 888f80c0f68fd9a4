package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/informer-host/informer-host/config"
	"github.com/informer-host/informer-host/host"
)

// validateCommand checks the config file, then every module in its plugin
// directory (compile, ABI, instantiate, init with its config), and prints
// one line per module. Exit 1 if anything is wrong.
func validateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("validate", flag.ContinueOnError)
	path := flags.String("config", "config.yaml", "config file to check")
	startTimeout := flags.Duration("start-timeout", 10*time.Second, "how long a module may take to start (start function, _initialize, ih_init)")
	if code, ok := parseFlags(flags, args, stderr); !ok {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d resources)\n", *path, len(cfg.Resources))
	reports, err := host.ValidateModules(ctx, cfg, *startTimeout, nil)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "%s: plugin directory does not exist; no modules checked\n", cfg.PluginDir())
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	code := 0
	for _, r := range reports {
		if r.Err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", r.File, r.Err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok%s\n", r.File, capabilities(r))
		for _, c := range r.Ungranted {
			fmt.Fprintf(stdout, "%s: warning: imports %s functions but is not granted %q; it loads, and those calls return ERR_DENIED (grant it under plugins.modules[].grants)\n", r.File, c, c)
		}
	}
	return code
}

// capabilities renders what a module requests next to what it is granted,
// " (requests: cache; granted: cache)", or "" when it requests nothing and
// is granted nothing.
func capabilities(r host.ModuleReport) string {
	if len(r.Requested) == 0 && len(r.Granted) == 0 {
		return ""
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf(" (requests: %s; granted: %s)", list(r.Requested), list(r.Granted))
}
