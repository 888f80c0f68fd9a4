package host

import (
	"fmt"
	"runtime"
	"testing"
)

// TestDeliveryQueueReleasesEmptyCursor: once a large replay (an initial
// list) is done, the queue gives the cursor's storage back. It kept a Go
// map and slice sized for the whole list, about 6 MiB per plugin after
// 50,000 objects, for the plugin's life (issue 15).
func TestDeliveryQueueReleasesEmptyCursor(t *testing.T) {
	for _, mode := range []DeliveryMode{DeliverEvery, DeliverLatest} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			q := NewDeliveryQueue(mode, 100)
			base := liveHeap()
			keys := make([]objectKey, 20000)
			for i := range keys {
				keys[i] = objectKey{resource: "cms", namespace: "ns", name: fmt.Sprintf("object-with-a-longish-name-%05d", i)}
			}
			q.AddReplay(keys, true)
			keys = nil
			n := 0
			for {
				d, ok := q.take()
				if !ok {
					break
				}
				if !d.replay {
					t.Fatalf("entry %d is not a replay", n)
				}
				n++
			}
			if n != 20000 {
				t.Fatalf("took %d replay entries, want 20000", n)
			}
			// The names' strings are garbage now; what is left is the
			// queue's own storage.
			held := liveHeap() - base
			if held > 256<<10 {
				t.Errorf("an empty queue holds %d KiB after a replay of 20,000 keys; want its cursor released", held>>10)
			}
			// And it still works.
			q.AddReplay([]objectKey{{resource: "cms", namespace: "ns", name: "again"}}, false)
			if d, ok := q.take(); !ok || !d.replay || d.key.name != "again" {
				t.Errorf("after the release, take = %+v, %v; want the replay of again", d, ok)
			}
			runtime.KeepAlive(q)
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
