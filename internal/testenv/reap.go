package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A test binary that panics or hits go test's timeout exits without
// running TestMain's Stop, and envtest starts its processes in their own
// process group, so nothing else ends its etcd and kube-apiserver. To
// clean up after such a run, and only such a run, every control plane
// Run starts is recorded in a file of its own under the run directory:
// the test binary's PID and the PIDs of the processes it started, each
// with its start time (a PID alone may have been reused since). The
// next Start kills the processes of records whose owner is gone.
//
// Recognising an orphan by what it is (a binary from the cache directory
// whose parent is init) is not enough: a control plane a person runs with
// `make cluster &`, or one whose parent died in a shell that exited, looks
// exactly the same. Only records say what a test run started.
//
// Only Linux has /proc; elsewhere nothing is recorded or reaped.

// runRecord is the content of one record file.
type runRecord struct {
	Owner     procID   `json:"owner"`
	Processes []procID `json:"processes"`
}

// procID names a process across PID reuse.
type procID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // field 22 of /proc/PID/stat: clock ticks after boot
	Exe   string `json:"exe,omitempty"`
}

// runDir is where the records live: next to the control plane binaries'
// cache, not in them, since KUBEBUILDER_ASSETS may be read-only.
func runDir() (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "testenv-runs"), nil
}

// procStat reads a process's parent and start time.
func procStat(pid int) (ppid int, start uint64, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	// stat is "pid (comm) state ppid ..."; comm may hold spaces and
	// parentheses, so fields are counted from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, err
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return ppid, start, err
}

// alive reports whether id still names the process it named when recorded.
func alive(id procID) bool {
	_, start, err := procStat(id.PID)
	return err == nil && start == id.Start
}

func self() (procID, error) {
	_, start, err := procStat(os.Getpid())
	return procID{PID: os.Getpid(), Start: start}, err
}

// childrenFrom lists this process's children whose binary is in dir: the
// processes envtest just started.
func childrenFrom(dir string) []procID {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procID
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != dir {
			continue
		}
		ppid, start, err := procStat(pid)
		if err != nil || ppid != os.Getpid() {
			continue
		}
		out = append(out, procID{PID: pid, Start: start, Exe: exe})
	}
	return out
}

// record writes the record of the control plane from dir this process
// has just started, and returns its path ("" when there is nothing to
// record). The file is named by the owner, so each run has its own.
func record(runs, dir string) (string, error) {
	owner, err := self()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil // no /proc
		}
		return "", err
	}
	procs := childrenFrom(dir)
	if len(procs) == 0 {
		return "", nil
	}
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return "", err
	}
	b, err := json.Marshal(runRecord{Owner: owner, Processes: procs})
	if err != nil {
		return "", err
	}
	path := filepath.Join(runs, fmt.Sprintf("%d-%d.json", owner.PID, owner.Start))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// reapOrphans kills the processes of every record in runs whose owner
// has exited, and removes those records. A recorded process is killed
// only if it is still the same process (same start time) running a
// binary from dir; nothing without a record is touched.
func reapOrphans(runs, dir string) {
	entries, err := os.ReadDir(runs)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(runs, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var r runRecord
		if err := json.Unmarshal(b, &r); err != nil {
			// Not ours to interpret; a half-written record is .tmp.
			continue
		}
		if alive(r.Owner) {
			continue
		}
		for _, p := range r.Processes {
			exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.PID), "exe"))
			if err != nil || filepath.Dir(exe) != dir || !alive(p) {
				continue
			}
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		_ = os.Remove(path)
	}
}
