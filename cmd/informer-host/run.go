package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informer-host/informer-host/config"
	"github.com/informer-host/informer-host/informer"
)

// logOptions are the flags every long-running command shares.
type logOptions struct {
	format string
	level  string
}

func (o *logOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", o.format)
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "config.yaml", "config file")
	var lo logOptions
	lo.register(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	log, err := lo.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host run:", err)
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := run(ctx, cfg, log); err != nil {
		log.Error("informer-host stopped", "err", err)
		return 1
	}
	return 0
}

// run runs the pipeline until ctx ends.
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	restCfg, source, err := restConfig(cfg)
	if err != nil {
		return err
	}
	log.Info("informer-host starting", "version", versionString(), "config", cfg.File, "apiserver", restCfg.Host, "credentials", source)
	p, err := informer.New(informer.Options{RESTConfig: restCfg, Logger: log})
	if err != nil {
		return err
	}
	defer p.Stop()
	if err := p.Apply(ctx, cfg.Resources); err != nil {
		return err
	}
	// Until plugins are loaded, every event is logged so the pipeline can
	// be watched.
	for _, r := range cfg.Resources {
		if _, err := p.AddListener(r.Name, eventLogger(log)); err != nil {
			return err
		}
	}
	<-ctx.Done()
	log.Info("informer-host stopping")
	return nil
}

func eventLogger(log *slog.Logger) informer.ListenerFunc {
	return func(ev *informer.Event) {
		attrs := []any{"resource", ev.Resource.Name, "type", ev.Type.String(), "object", ev.Key()}
		if ev.IsInInitialList {
			attrs = append(attrs, "initialList", true)
		}
		if ev.FinalStateUnknown {
			attrs = append(attrs, "finalStateUnknown", true)
		}
		log.Info("event", attrs...)
	}
}

// restConfig finds the apiserver: the kubeconfig the config file names;
// else the in-cluster service account; else $KUBECONFIG or ~/.kube/config.
func restConfig(cfg *config.Config) (*rest.Config, string, error) {
	if path := cfg.KubeconfigPath(); path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s (from %s): %w", path, cfg.File, err)
		}
		return c, "kubeconfig " + path, nil
	}
	c, err := rest.InClusterConfig()
	if err == nil {
		return c, "in-cluster service account", nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, "", fmt.Errorf("in-cluster config: %w", err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	c, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no apiserver to talk to: not in a cluster, kubeconfig not set in %s, and $KUBECONFIG/~/.kube/config: %w", cfg.File, err)
	}
	return c, "kubeconfig " + strings.Join(rules.GetLoadingPrecedence(), ":"), nil
}
