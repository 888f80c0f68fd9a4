package shard

import coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

// fakeLeases satisfies Options.Client for tests that never call it.
type fakeLeases struct{}

func (fakeLeases) Leases(string) coordinationclient.LeaseInterface { return nil }
