package config

import (
	"testing"
	"time"
)

func TestShardingDefaults(t *testing.T) {
	cases := []struct {
		name, in string
		want     Sharding
	}{
		{"absent", withHead(), Sharding{Namespace: podNamespace(serviceAccountNamespaceFile), LeasePrefix: DefaultLeasePrefix,
			Key: ShardKeyObject, LeaseDuration: NewDuration(DefaultLeaseDuration), RenewDeadline: NewDuration(DefaultRenewDeadline),
			RetryPeriod: NewDuration(DefaultRetryPeriod)}},
		{"set", withHead("sharding:", "  enabled: true", "  namespace: ops", "  leasePrefix: hooks", "  key: namespace",
			"  leaseDuration: 4s", "  renewDeadline: 3s", "  retryPeriod: 1s"),
			Sharding{Enabled: true, Namespace: "ops", LeasePrefix: "hooks", Key: ShardKeyNamespace,
				LeaseDuration: NewDuration(4 * time.Second), RenewDeadline: NewDuration(3 * time.Second), RetryPeriod: NewDuration(time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if c.Sharding != tc.want {
				t.Errorf("sharding = %+v\nwant       %+v", c.Sharding, tc.want)
			}
		})
	}
}
