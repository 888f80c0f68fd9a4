package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
)

// validateCommand checks the config file, then every module in its plugin
// directory (compile, ABI, instantiate, init with its config), and prints
// one line per module. Exit 1 if anything is wrong. Mistakes the file
// may still be right about (a modules entry naming no file present, a
// resource the cluster does not serve, with --kubeconfig) are warnings.
func validateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("validate", flag.ContinueOnError)
	path := flags.String("config", "config.yaml", "config file to check")
	startTimeout := flags.Duration("start-timeout", 10*time.Second, "how long a module may take to start (start function, _initialize, ih_init)")
	pluginDir := flags.String("plugin-dir", "", "check the modules in this directory instead of plugins.directory (the one they are deployed to, say)")
	kubeconfig := flags.String("kubeconfig", "", "also check that the apiserver of this kubeconfig serves every resource, suggesting the nearest served names for one it does not")
	if code, ok := parseFlags(flags, args, stderr); !ok {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *pluginDir != "" {
		if cfg.Plugins.Directory, err = filepath.Abs(*pluginDir); err != nil {
			fmt.Fprintln(stderr, "informer-host validate: --plugin-dir:", err)
			return 2
		}
	}
	fmt.Fprintf(stdout, "%s: ok (%d resources)\n", *path, len(cfg.Resources))
	if *kubeconfig != "" {
		if err := validateResources(ctx, cfg, *kubeconfig, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	reports, err := host.ValidateModules(ctx, cfg, *startTimeout, nil)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "%s: plugin directory does not exist; no modules checked (give the one they are deployed to with --plugin-dir)\n", cfg.PluginDir())
		return 0
	}
	if err == nil {
		var unmatched config.Errors
		if unmatched, err = host.UnmatchedModules(cfg); err == nil {
			for _, p := range unmatched {
				fmt.Fprintln(stdout, warning(p))
			}
		}
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

// validateResources resolves every configured resource against the
// apiserver of kubeconfig through the pipeline's own discovery and
// RESTMapper, and warns, at its entry, about each one it does not serve,
// with the nearest served names. The error is for a cluster that cannot
// be asked.
func validateResources(ctx context.Context, cfg *config.Config, kubeconfig string, stdout io.Writer) error {
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	p, err := informer.New(informer.Options{RESTConfig: restCfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer p.Stop()
	served := 0
	for _, r := range cfg.Resources {
		_, err := p.Resolve(ctx, r)
		var notServed *informer.NotServedError
		switch {
		case errors.As(err, &notServed):
			fmt.Fprintln(stdout, warning(cfg.ResourceProblem(r.Name, "%v", err)))
		case err != nil:
			return fmt.Errorf("--kubeconfig %s: resource %q: %w", kubeconfig, r.Name, err)
		default:
			served++
		}
	}
	fmt.Fprintf(stdout, "%s: %d of %d resources served\n", restCfg.Host, served, len(cfg.Resources))
	return nil
}

// warning renders p the way the config's errors are, marked as a warning:
// "config.yaml:12: warning: plugins.modules[0].file: ...".
func warning(p config.Problem) string {
	p.Message = "warning: " + p.Message
	return p.String()
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
