// Package shard makes replicas of informer-host members of one sharding
// group: each member holds a coordination.k8s.io/v1 Lease of its own,
// labelled with the group, lists the group's Leases, renews its own only
// after a successful list (a member that cannot see the group is never
// counted), and computes which objects it owns by rendezvous hashing of
// an object key over the members whose Leases are live. A member writes
// no Lease until its replica can process its share (Options.Ready), so
// the others keep that share meanwhile. A joining member then owns
// nothing until every other live member's Lease acknowledges it
// (AnnotationView), which they write only once they stopped owning its
// share.
//
// A Member publishes an Assignment each time its view changes; the host
// delivers to its plugins only the objects the current Assignment owns.
// An Assignment is valid only until its member's last successful renewal
// and list are renewDeadline old: past that it owns nothing, whatever
// goroutine looks at it and however late the member's own loop runs
// (fencing). RATIONALE.md ("Sharding: why two members never own one
// object") gives the argument and the bound.
//
// Rule of direction: shard imports nothing of informer-host; host and the
// daemon's command import it.
package shard
