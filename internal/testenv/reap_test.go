package testenv

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fakeControlPlane is a process whose binary lives in the assets
// directory, as etcd's does: a copy of bash named etcd. It reports that it
// is ready, and on SIGTERM that it survived until then. A process killed
// by the reaper's SIGKILL can run no handler afterwards, so "survived"
// proves the reaper left it alone.
type fakeControlPlane struct {
	pid            int
	cmd            *exec.Cmd // nil when orphaned
	ready, survive string
}

func fakeAssets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile("/bin/bash")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startFake starts the fake as a child of the test, or orphaned: started
// through a shell that exits at once, so its parent becomes init, just as
// `make cluster &` from a shell that has exited.
func startFake(t *testing.T, assets string, orphan bool) *fakeControlPlane {
	t.Helper()
	dir := t.TempDir()
	f := &fakeControlPlane{ready: filepath.Join(dir, "ready"), survive: filepath.Join(dir, "survived")}
	script := `trap 'echo yes > ` + f.survive + `; exit 0' TERM; echo $$ > ` + f.ready + `; while :; do sleep 0.2 & wait $!; done`
	etcd := filepath.Join(assets, "etcd")
	if orphan {
		out, err := exec.Command("/bin/sh", "-c", `"$0" -c "$1" >/dev/null 2>&1 & echo $!`, etcd, script).Output()
		if err != nil {
			t.Fatal(err)
		}
		if f.pid, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
			t.Fatal(err)
		}
	} else {
		f.cmd = exec.Command(etcd, "-c", script)
		if err := f.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.pid = f.cmd.Process.Pid
	}
	t.Cleanup(func() { _ = syscall.Kill(f.pid, syscall.SIGKILL); f.wait() })
	Eventually(t, "the fake control plane to start", func() bool {
		_, err := os.Stat(f.ready)
		return err == nil
	})
	return f
}

func (f *fakeControlPlane) wait() error {
	if f.cmd == nil || f.cmd.ProcessState != nil {
		return nil
	}
	return f.cmd.Wait()
}

// survived stops the fake and says whether it was still alive to hear it.
func (f *fakeControlPlane) survived(t *testing.T) bool {
	t.Helper()
	if f.cmd != nil {
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		err := f.wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
			return false
		}
	} else if err := syscall.Kill(f.pid, syscall.SIGTERM); err != nil {
		return false // gone already
	}
	var ok bool
	Eventually(t, "the fake control plane to answer SIGTERM", func() bool {
		_, err := os.Stat(f.survive)
		ok = err == nil
		// An orphan that was killed writes nothing; it is gone from /proc
		// (init reaps it), which ends the wait too.
		_, _, gone := procStat(f.pid)
		return ok || gone != nil
	})
	return ok
}

func readRecord(t *testing.T, path string) runRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r runRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func rewriteRecord(t *testing.T, path string, edit func(*runRecord)) {
	t.Helper()
	r := readRecord(t, path)
	edit(&r)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deadOwner is a test binary that has exited.
func deadOwner(t *testing.T) procID {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// Start 0 never matches a live process, even if the PID is reused.
	return procID{PID: cmd.Process.Pid, Start: 0}
}

// The reaper kills the control plane of a test run that died, and nothing
// else: not a control plane a person started from the same binaries and
// left running in the background (its parent is init, like an orphan's),
// not one whose test binary still runs, and not a process that took over
// a recorded PID.
func TestReapOnlyWhatTestRunsStarted(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("these tests need /proc (Linux): %v", err)
	}
	tests := []struct {
		name       string
		orphan     bool
		record     func(t *testing.T, path string) // edits the record; nil = no record
		wantKilled bool
		wantRecord bool // the record is still there after reaping
	}{
		{name: "background control plane a person started, parent init", orphan: true},
		{name: "not recorded, parent alive"},
		{name: "recorded, owner alive", record: func(*testing.T, string) {}, wantRecord: true},
		{name: "recorded, owner dead", wantKilled: true, record: func(t *testing.T, path string) {
			owner := deadOwner(t)
			rewriteRecord(t, path, func(r *runRecord) { r.Owner = owner })
		}},
		{name: "recorded, owner dead, PID now another process", record: func(t *testing.T, path string) {
			owner := deadOwner(t)
			rewriteRecord(t, path, func(r *runRecord) {
				r.Owner = owner
				r.Processes[0].Start++
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assets, runs := fakeAssets(t), t.TempDir()
			f := startFake(t, assets, tc.orphan)
			if tc.orphan {
				if ppid, _, err := procStat(f.pid); err == nil {
					t.Logf("orphaned fake: pid %d, parent %d", f.pid, ppid)
				}
			}
			var path string
			if tc.record != nil {
				var err error
				if path, err = record(runs, assets); err != nil || path == "" {
					t.Fatalf("record: %q, %v", path, err)
				}
				tc.record(t, path)
			}
			reapOrphans(runs, assets)
			if got := !f.survived(t); got != tc.wantKilled {
				t.Errorf("killed = %v, want %v", got, tc.wantKilled)
			}
			if path != "" {
				_, err := os.Stat(path)
				if got := err == nil; got != tc.wantRecord {
					t.Errorf("record still there = %v, want %v", got, tc.wantRecord)
				}
			}
		})
	}
}

// record lists exactly the test binary's own children from the assets
// directory.
func TestRecordNamesOwnChildren(t *testing.T) {
	assets, runs := fakeAssets(t), t.TempDir()
	mine := startFake(t, assets, false)
	other := startFake(t, assets, true)
	path, err := record(runs, assets)
	if err != nil {
		t.Fatal(err)
	}
	r := readRecord(t, path)
	if r.Owner.PID != os.Getpid() {
		t.Errorf("owner %d, want %d", r.Owner.PID, os.Getpid())
	}
	if len(r.Processes) != 1 || r.Processes[0].PID != mine.pid {
		t.Errorf("processes %+v, want only pid %d (not %d)", r.Processes, mine.pid, other.pid)
	}
}
