package main

import (
	"flag"
	"fmt"

	"k8s.io/client-go/rest"
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
// apiserver: its informers' lists and watches, its leases and reviews.
type apiClientOptions struct {
	qps   float64
	burst int
}

func (o *apiClientOptions) register(fs *flag.FlagSet) {
	fs.Float64Var(&o.qps, "kube-api-qps", defaultAPIQPS, "the daemon's own requests a second to the apiserver (informers, leases); each plugin's writes and Events have their grant's rate instead")
	fs.IntVar(&o.burst, "kube-api-burst", defaultAPIBurst, "the burst of --kube-api-qps")
}

func (o apiClientOptions) check() error {
	switch {
	case o.qps < 0:
		return fmt.Errorf("--kube-api-qps: %g is negative", o.qps)
	case o.burst < 0:
		return fmt.Errorf("--kube-api-burst: %d is negative", o.burst)
	}
	return nil
}

// apply sets the limit on c; a zero leaves c's own (the kubeconfig's, or
// client-go's default).
func (o apiClientOptions) apply(c *rest.Config) {
	if o.qps > 0 {
		c.QPS = float32(o.qps)
	}
	if o.burst > 0 {
		c.Burst = o.burst
	}
}
