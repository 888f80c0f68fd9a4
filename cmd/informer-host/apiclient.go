package main

import (
	"flag"
	"fmt"

	"github.com/informer-host/informer-host/internal/daemon"
)

// Defaults of the daemon's own client-side limit. client-go's (5/s,
// burst 10) is meant for a kubectl; the daemon lists every configured
// resource at start and again on every repair. Plugins' writes and
// Events do not count against it: each plugin has a client of its own
// with its grant's rate (kubewrite.Budget).
const (
	defaultAPIQPS   = 50
	defaultAPIBurst = 100
)

// apiClientOptions are the daemon's client-side limit towards the
// apiserver, for its informers' lists and watches (daemon.Options.APIClient).
type apiClientOptions struct {
	limit daemon.APILimit
}

func (o *apiClientOptions) register(fs *flag.FlagSet) {
	fs.Float64Var(&o.limit.QPS, "kube-api-qps", defaultAPIQPS, "the daemon's own requests a second to the apiserver (informers, leases); each plugin's writes and Events have their grant's rate instead")
	fs.IntVar(&o.limit.Burst, "kube-api-burst", defaultAPIBurst, "the burst of --kube-api-qps")
}

func (o apiClientOptions) check() error {
	switch {
	case o.limit.QPS < 0:
		return fmt.Errorf("--kube-api-qps: %g is negative", o.limit.QPS)
	case o.limit.Burst < 0:
		return fmt.Errorf("--kube-api-burst: %d is negative", o.limit.Burst)
	}
	return nil
}
