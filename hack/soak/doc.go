// Package soak is the daemon's soak test: real informer-host processes —
// two members of a sharding group and a leader-elected pair with a warm
// standby — under a ground-truth checker plugin, while objects churn and
// the faults a cluster daemon meets happen one after another: plugin
// reloads, watches cut with their resourceVersion expired, the apiserver
// unreachable, kube-apiserver and etcd SIGKILLed and started again, etcd
// SIGSTOPped, a member SIGKILLed, a member SIGSTOPped past its Lease, the
// leader SIGKILLed, the leader SIGSTOPped past its lease. A process that
// exits by itself (a leader that lost its lease does) is started again,
// as the kubelet would.
//
// The checker plugin (checker/) reports every change it is given to an
// HTTP server in the test, which keeps each member's view; after every
// fault the churn pauses and each group's views are compared with what
// the apiserver lists: every object in exactly one member's view, at the
// cluster's resourceVersion (the pair has one view, its leader's). The test prints objects lost (the goal is
// 0), the time to reconverge after each fault, and the members' RSS and
// goroutines over time, and fails on any loss or growth.
//
// `make test` runs one pass over every fault; `make soak` runs them for
// SOAK_DURATION (10m by default; an hour by hand):
//
//	go test ./hack/soak -run TestSoak -timeout 0 -v -args -soak.duration=1h
//
// Rule of direction: nothing imports soak, and it depends on nothing of
// the daemon's but its binary, its config and the ABI: it imports only
// the test environment.
package soak
