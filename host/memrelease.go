package host

import (
	"runtime/debug"
	"sync"
	"time"
)

// memReleaser returns the heap's free memory to the OS once a large
// replay (an initial list, a restart's replay, a repair) is over (issue
// 15). During an initial list of 50,000 objects every plugin's replay
// cursor holds the list's keys and the events' garbage piles up; the
// queue gives the cursor back when it empties (releaseReplay), but the Go
// runtime hands freed memory back to the OS only gradually, so the
// process kept its peak for minutes. One collection and release after the
// plugins have caught up costs one garbage collection, once per large
// replay (a plugin synced after an initial list of more than replayKeep
// objects, or a large cursor emptied), coalesced over all plugins
// finishing theirs within memReleaseDelay of each other.
//
// The zero value is ready to use; soon is safe for concurrent use.
type memReleaser struct {
	mu    sync.Mutex
	timer *time.Timer // nil until the first soon
	// release is what runs; debug.FreeOSMemory unless a test replaces it.
	release func()
}

// memReleaseDelay is how long after the last soon the release runs: the
// plugins of a host finish their initial lists within moments of each
// other, and one release after the last is enough.
const memReleaseDelay = time.Second

// soon schedules a release memReleaseDelay from now, postponing one that
// is due.
func (m *memReleaser) soon() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Reset(memReleaseDelay)
		return
	}
	m.timer = time.AfterFunc(memReleaseDelay, func() {
		m.mu.Lock()
		f := m.release
		m.mu.Unlock()
		if f == nil {
			f = debug.FreeOSMemory
		}
		f()
	})
}
