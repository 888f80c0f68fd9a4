package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
		fmt.Fprintf(stdout, "%s: ok\n", r.File)
	}
	return code
}
