// Command cluster starts the same local control plane the tests use
// (kube-apiserver and etcd on loopback, through envtest) with
// kube-controller-manager's workload controllers (testenv.ControllerNames),
// writes an administrator kubeconfig and waits for Ctrl-C. `make cluster`
// runs it. No scheduler or kubelet runs: Pods stay Pending.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/informer-host/informer-host/internal/testenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// A flag set of its own: controller-runtime (through envtest) registers
	// --kubeconfig on flag.CommandLine in an init function, so defining it
	// there again panics with "flag redefined: kubeconfig".
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "build/kubeconfig", "where to write the administrator kubeconfig")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	controllers, err := env.StartControllers(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Deferred last, so stopped first: after the control plane the
	// controllers would only log that the apiserver went away.
	defer func() { _ = controllers.Stop() }()
	if err := env.WriteKubeconfig(*kubeconfig); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, `control plane running: kube-apiserver at %s
kube-controller-manager running: %s
(no scheduler or kubelet: Pods are created and stay Pending)
kubeconfig written to %s; use it with
  export KUBECONFIG=%s
  informer-host run --config config.yaml
Ctrl-C stops the control plane.
`, env.Config.Host, strings.Join(testenv.ControllerNames(), ", "), *kubeconfig, *kubeconfig)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping the control plane")
	return 0
}
