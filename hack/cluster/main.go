// Command cluster starts the same local control plane the tests use
// (kube-apiserver and etcd on loopback, through envtest), writes an
// administrator kubeconfig and waits for Ctrl-C. `make cluster` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/informer-host/informer-host/internal/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "build/kubeconfig", "where to write the administrator kubeconfig")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() { _ = env.Stop() }()
	if err := env.WriteKubeconfig(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Printf(`control plane running: kube-apiserver at %s
kubeconfig written to %s; use it with
  export KUBECONFIG=%s
  informer-host run --config config.yaml
Ctrl-C stops the control plane.
`, env.Config.Host, *kubeconfig, *kubeconfig)
	<-ctx.Done()
	fmt.Println("stopping the control plane")
}
