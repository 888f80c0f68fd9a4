package state

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writerEnv, set to a path, makes the test binary the helper process of
// TestVersionsNeverReusedAfterSIGKILL instead of running tests.
const writerEnv = "STATE_TEST_SIGKILL_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		runWriter(path)
		os.Exit(3) // runWriter only returns on an error; it is killed
	}
	os.Exit(m.Run())
}

// runWriter writes state without end, as a plugin would, and prints each
// write it made as "set <key> <version> <value>", and "flushed" after
// each explicit flush. The flush interval is long: the only flushes are
// the explicit ones, so every version printed after the last "flushed"
// is one the file never held.
func runWriter(path string) {
	s, err := Open(context.Background(), Options{Path: path, FlushInterval: 1 << 40, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	b := s.Bucket("w.wasm", Quota{})
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		k, v := fmt.Sprintf("k%02d", i%40), fmt.Sprintf("v%d", i)
		ver, err := b.Set([]byte(k), []byte(v), Any)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		fmt.Fprintf(out, "set %s %d %s\n", k, ver, v)
		// Into the pipe before the flush below can put it on disk: the
		// reader lags behind, and a version the file holds must be one
		// the test has been told of, even when the kill lands between.
		if err := out.Flush(); err != nil {
			return
		}
		if i%500 == 499 {
			if err := s.Flush(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return
			}
			fmt.Fprintln(out, "flushed")
		}
		if err := out.Flush(); err != nil {
			return
		}
	}
}

// TestVersionsNeverReusedAfterSIGKILL kills a process that writes state,
// for real, between two flushes, and reopens its file: the store must
// hand out only versions above every version the killed process handed
// out, flushed or not, and hold only writes the process made.
func TestVersionsNeverReusedAfterSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	type write struct {
		key, value string
	}
	issued := map[int64]write{} // every version handed out, by anyone
	var top int64
	for run := range 3 { // each run starts from what the previous left
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		flushes, sinceFlush, killed := 0, 0, false
		for sc.Scan() {
			line := sc.Text()
			if line == "flushed" {
				flushes++
				sinceFlush = 0
				continue
			}
			var w write
			var ver int64
			if _, err := fmt.Sscanf(line, "set %s %d %s", &w.key, &ver, &w.value); err != nil {
				t.Fatalf("writer said %q: %v", line, err)
			}
			if _, dup := issued[ver]; dup || ver <= 0 {
				t.Fatalf("run %d: writer got version %d twice", run, ver)
			}
			issued[ver] = w
			top = max(top, ver)
			sinceFlush++
			// Kill mid-interval: three flushes in, 200 writes past the last.
			if !killed && flushes >= 3 && sinceFlush >= 200 {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !killed || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("run %d: the writer was not killed by SIGKILL: %v; stderr: %s", run, err, stderr.String())
		}

		s, logs := open(t, path)
		if !s.Persistent() || strings.Contains(logs.String(), "corrupt") {
			t.Fatalf("run %d: the file after a SIGKILL is not usable: %s", run, logs)
		}
		b := s.Bucket("w.wasm", Quota{})
		var keys []string
		b.List(nil, nil, 0, func(k string) bool { keys = append(keys, k); return true })
		for _, k := range keys {
			v, ver, _ := b.Get([]byte(k))
			if w, ok := issued[ver]; !ok || w.key != k || w.value != string(v) {
				t.Errorf("run %d: reopened %s = %q@%d, which the writer did not write (it wrote %+v at that version)", run, k, v, ver, w)
			}
		}
		if len(keys) == 0 {
			t.Fatalf("run %d: nothing flushed survived", run)
		}
		for i := range 100 {
			k := fmt.Sprintf("after%d", i)
			ver := mustSet(t, b, k, "x")
			if ver <= top {
				t.Fatalf("run %d: version %d handed out again after the SIGKILL (the killed writer handed out up to %d)", run, ver, top)
			}
			issued[ver] = write{k, "x"}
			top = ver
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
