package delivery

import (
	"fmt"
	"runtime"
	"testing"
)

// TestDeliveryQueueReleasesEmptyCursor: once a large replay (an initial
// list) is done, the queue gives the cursor's storage back. It kept a Go
// map and slice sized for the whole list, about 6 MiB per plugin after
// 50,000 objects, for the plugin's life.
func TestDeliveryQueueReleasesEmptyCursor(t *testing.T) {
	for _, mode := range []Mode{Every, Latest} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			q := New(mode, 100, nil)
			released := 0
			q.onReleased = func() { released++ }
			base := liveHeap()
			keys := make([]Key, 20000)
			for i := range keys {
				keys[i] = Key{Resource: "cms", Namespace: "ns", Name: fmt.Sprintf("object-with-a-longish-name-%05d", i)}
			}
			q.AddReplay(keys, true)
			keys = nil
			n := 0
			for {
				d, ok := q.take()
				if !ok {
					break
				}
				if !d.Replay {
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
			if released != 1 {
				t.Errorf("onReleased called %d times after a replay of 20,000 keys, want once", released)
			}
			// And it still works.
			q.AddReplay([]Key{{Resource: "cms", Namespace: "ns", Name: "again"}}, false)
			if d, ok := q.take(); !ok || !d.Replay || d.Key.Name != "again" {
				t.Errorf("after the release, take = %+v, %v; want the replay of again", d, ok)
			}
			if released != 1 {
				t.Errorf("onReleased called %d times in all, want once: a small replay keeps its storage", released)
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

// A cursor cleared by a restart before it was delivered drops its storage
// but releases no memory: a plugin failing in a loop would make the host
// collect after every restart.
func TestDeliveryQueueClearedCursorReleasesNothing(t *testing.T) {
	q := New(Every, 100, nil)
	released := 0
	q.onReleased = func() { released++ }
	keys := make([]Key, 2000)
	for i := range keys {
		keys[i] = Key{Resource: "cms", Namespace: "ns", Name: fmt.Sprintf("o-%04d", i)}
	}
	for restart := 0; restart < 3; restart++ {
		q.AddReplay(keys, true)
		if d, ok := q.take(); !ok || !d.Replay {
			t.Fatalf("take = %+v, %v; want a replay entry", d, ok)
		}
		q.Clear()
	}
	if released != 0 {
		t.Errorf("onReleased called %d times for cursors cleared before their end, want 0", released)
	}
}
