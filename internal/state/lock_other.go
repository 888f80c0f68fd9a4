//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package state

import (
	"os"
	"time"
)

// lockFile does nothing where flock is not available; bbolt's own lock
// still keeps a second host from opening the file.
func lockFile(*os.File, time.Duration) error { return nil }
