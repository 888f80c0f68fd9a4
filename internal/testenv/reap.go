package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reapOrphans kills control-plane processes (binaries from dir) that a
// previous test binary left behind: a test that panics or hits go test's
// timeout exits without running TestMain's Stop, and envtest starts its
// processes in their own process group, so nothing else ends them. An
// orphan is recognised by its parent being init (pid 1); the control
// planes of test binaries still running have their test binary as parent
// and are left alone. Only Linux has /proc; elsewhere this does nothing.
func reapOrphans(dir string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != dir {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// stat is "pid (comm) state ppid ..."; comm may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != "1" {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
