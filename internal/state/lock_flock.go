//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package state

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes the exclusive flock that bbolt takes on its file (on the
// file's own open description, so it is released when f is closed),
// waiting up to timeout for another process to release it.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("locked by another process (waited %v)", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
