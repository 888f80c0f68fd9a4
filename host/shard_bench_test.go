package host

import (
	"fmt"
	"testing"
	"time"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/internal/shard"
)

// BenchmarkShardDispatch is the cost of sharding on the event path: one
// no-op plugin, one small object, without sharding (the baseline) and
// with this member owning the object among 1 and 5 live members (the
// ownership check hashes the key once per member).
func BenchmarkShardDispatch(b *testing.B) {
	o := benchenv.Meta()
	ref := benchenv.Objects[0].Ref
	for _, members := range []int{0, 1, 5} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			bh := newBenchHost(b, true)
			if members > 0 {
				var ids []string
				for i := range members {
					ids = append(ids, fmt.Sprintf("m%d", i))
				}
				now := time.Now()
				probe := shard.NewAssignment("m0", ids, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
				self := probe.Owner(o.GetNamespace(), o.GetName())
				bh.h.SetAssignment(shard.NewAssignment(self, ids, shard.KeyNamespaceName, true, now, now.Add(time.Hour)))
			}
			ls := bh.start(b, "noop-wat.wasm", "noop-wat")
			bh.feed(b, []*bindingListener{ls[ref.Name]}, o, ref)
		})
	}
}
