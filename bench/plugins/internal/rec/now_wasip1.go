//go:build wasip1

package rec

import "time"

// clockTimeGet is WASI's clock_time_get, imported directly: time.Now
// makes two of these calls (the wall and the monotonic clock), and a
// record needs only the wall clock.
//
//go:wasmimport wasi_snapshot_preview1 clock_time_get
func clockTimeGet(id uint32, precision uint64, t *uint64) uint32

// clockRealtime is WASI's realtime clock id.
const clockRealtime = 0

// Now returns the wall clock with one host call (no monotonic reading:
// records compare Unix times with the harness's).
func Now() time.Time {
	var t uint64
	if clockTimeGet(clockRealtime, 0, &t) != 0 {
		return time.Now()
	}
	return time.Unix(0, int64(t))
}
