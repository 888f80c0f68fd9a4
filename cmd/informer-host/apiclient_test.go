package main

import (
	"flag"
	"io"
	"testing"

	"k8s.io/client-go/rest"
)

// The daemon's client limit: the flags' defaults replace client-go's
// 5/s; a value given wins; zero (tests' daemon.Options) keeps the
// kubeconfig's; a negative one is refused.
func TestAPIClientFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		qps        float32
		burst      int
		refused    bool
		kubeconfig *rest.Config
	}{
		{args: nil, qps: defaultAPIQPS, burst: defaultAPIBurst},
		{args: []string{"--kube-api-qps=20", "--kube-api-burst=30"}, qps: 20, burst: 30},
		{args: []string{"--kube-api-qps=0", "--kube-api-burst=0"}, qps: 7, burst: 9, kubeconfig: &rest.Config{QPS: 7, Burst: 9}},
		{args: []string{"--kube-api-qps=-1"}, refused: true},
	} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o apiClientOptions
		o.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := o.check(); (err != nil) != tc.refused {
			t.Errorf("%q: check %v", tc.args, err)
			continue
		}
		if tc.refused {
			continue
		}
		c := tc.kubeconfig
		if c == nil {
			c = &rest.Config{}
		}
		o.limit.Apply(c)
		if c.QPS != tc.qps || c.Burst != tc.burst {
			t.Errorf("%q: QPS %g burst %d, want %g %d", tc.args, c.QPS, c.Burst, tc.qps, tc.burst)
		}
	}
}
