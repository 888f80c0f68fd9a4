package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/controllerwrites"
	"github.com/informer-host/informer-host/internal/daemon"
)

const finalizersUsage = "usage: informer-host finalizers release -config FILE -plugin NAME [-deleting-only] [-kubeconfig FILE]"

// finalizersCommand releases a controller plugin's managed finalizer by
// hand (RATIONALE.md, "Managed finalizers: who removes them when a
// plugin goes"): the objects it holds in Terminating finish deleting
// without the plugin's cleanup. It acts as the operator's identity (the
// daemon's kubeconfig lookup, or -kubeconfig), not the plugin's.
func finalizersCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "release" {
		fmt.Fprintln(stderr, finalizersUsage)
		return 2
	}
	fs := flag.NewFlagSet("finalizers release", flag.ContinueOnError)
	path := fs.String("config", "config.yaml", "the config that names the plugin (the one it was last deployed with, when it has been removed since)")
	plugin := fs.String("plugin", "", "the plugin (its module file, e.g. cronjob.wasm) whose controller.finalizer to release")
	deleting := fs.Bool("deleting-only", false, "release only objects being deleted (Terminating); the others keep the finalizer")
	kubeconfig := fs.String("kubeconfig", "", "the cluster (default: as run finds it: the config's kubeconfig, in-cluster, $KUBECONFIG or ~/.kube/config)")
	if code, ok := parseFlags(fs, args[1:], stderr); !ok {
		return code
	}
	if *plugin == "" {
		fmt.Fprintln(stderr, "informer-host finalizers release: -plugin is required (the module file named in plugins.modules, e.g. cronjob.wasm)")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctl := cfg.SettingsFor(*plugin).Controller
	if ctl == nil || ctl.Finalizer == "" {
		fmt.Fprintf(stderr, "informer-host finalizers release: plugin %q has no controller.finalizer in %s: nothing to release "+
			"(give the config it was deployed with)\n", *plugin, *path)
		return 1
	}
	res, _ := cfg.Resource(ctl.For) // Load checked it exists
	restCfg, err := finalizersRESTConfig(cfg, *kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host finalizers release:", err)
		return 1
	}
	gvr := schema.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource}
	if gvr.Resource == "" {
		// Named by kind: its plural from the cluster's discovery.
		resolve, err := restDiscoveryResolver(restCfg)
		if err == nil {
			gvr.Resource, err = resolve(ctx, res.GroupVersion().WithKind(res.Kind))
		}
		if err != nil {
			fmt.Fprintf(stderr, "informer-host finalizers release: resource %q (kind %s): %v\n", res.Name, res.Kind, err)
			return 1
		}
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host finalizers release:", err)
		return 1
	}
	n, err := controllerwrites.Release(ctx, dyn, gvr, ctl.Finalizer, *deleting, res.Namespaces...)
	which := "objects"
	if *deleting {
		which = "objects being deleted"
	}
	fmt.Fprintf(stdout, "released %s from %d %s of %s\n", ctl.Finalizer, n, which, gvr.GroupResource())
	if err != nil {
		fmt.Fprintln(stderr, "informer-host finalizers release:", err)
		return 1
	}
	return 0
}

func finalizersRESTConfig(cfg *config.Config, kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	c, _, err := daemon.RESTConfig(cfg)
	return c, err
}
