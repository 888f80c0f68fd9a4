package config

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Sharding makes every replica an active member of a group that shares
// the objects out: each member holds a Lease of its own in
// Namespace, named "<leasePrefix>-<member id>" and labelled
// informer-host.io/shard-group=<leasePrefix>, and delivers to its plugins
// only the objects rendezvous hashing of Key gives it among the live
// members. The timings mean what leaderElection's do; see RATIONALE.md
// ("Sharding: why two members never own one object").
type Sharding struct {
	Enabled     bool   `yaml:"enabled" json:"enabled"`
	Namespace   string `yaml:"namespace" json:"namespace"`     // default: the pod's namespace, else "default"
	LeasePrefix string `yaml:"leasePrefix" json:"leasePrefix"` // default "informer-host-shard"
	// Key is what is hashed: "namespace" keeps a namespace's objects
	// together (cluster-scoped objects go by name), "namespace/name"
	// (the default) spreads them one by one.
	Key           string   `yaml:"key" json:"key"`
	LeaseDuration Duration `yaml:"leaseDuration" json:"leaseDuration"` // default 15s
	RenewDeadline Duration `yaml:"renewDeadline" json:"renewDeadline"` // default 10s
	RetryPeriod   Duration `yaml:"retryPeriod" json:"retryPeriod"`     // default 2s
}

const (
	DefaultLeasePrefix = "informer-host-shard"
	ShardKeyNamespace  = "namespace"
	ShardKeyObject     = "namespace/name"
)

func validateSharding(p *problems, c *Config) {
	s := c.Sharding
	sp := path{"sharding"}
	if s.Enabled && c.LeaderElection.Enabled {
		p.add(sp.key("enabled"), "sharding and leaderElection exclude each other: with sharding every replica delivers its share, with leader election one replica delivers everything; enable one")
	}
	if s.Namespace != "" {
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			p.add(sp.key("namespace"), "invalid namespace %q: %s", s.Namespace, strings.Join(errs, "; "))
		}
	}
	if s.LeasePrefix != "" {
		// A label value too (the group's label), so at most 63 characters.
		if errs := validation.IsDNS1123Label(s.LeasePrefix); len(errs) > 0 {
			p.add(sp.key("leasePrefix"), "invalid lease prefix %q: %s", s.LeasePrefix, strings.Join(errs, "; "))
		}
	}
	switch s.Key {
	case "", ShardKeyNamespace, ShardKeyObject:
	default:
		p.add(sp.key("key"), "unknown key %q; use %q (a namespace's objects together) or %q (object by object)",
			s.Key, ShardKeyNamespace, ShardKeyObject)
	}
	validateLeaseTimings(p, sp, s.LeaseDuration, s.RenewDeadline, s.RetryPeriod)
}

func (s *Sharding) applyDefaults() {
	if s.Namespace == "" {
		s.Namespace = podNamespace(serviceAccountNamespaceFile)
	}
	if s.LeasePrefix == "" {
		s.LeasePrefix = DefaultLeasePrefix
	}
	if s.Key == "" {
		s.Key = ShardKeyObject
	}
	s.LeaseDuration = NewDuration(orDefault(s.LeaseDuration, DefaultLeaseDuration))
	s.RenewDeadline = NewDuration(orDefault(s.RenewDeadline, DefaultRenewDeadline))
	s.RetryPeriod = NewDuration(orDefault(s.RetryPeriod, DefaultRetryPeriod))
}
