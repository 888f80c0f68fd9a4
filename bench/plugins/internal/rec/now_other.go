//go:build !wasip1

package rec

import "time"

// Now returns the wall clock (time.Now off wasip1).
func Now() time.Time { return time.Now() }
