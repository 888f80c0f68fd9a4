package testenv

import (
	"bytes"
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EventuallyTimeout is how long Eventually waits. It only detects a hang:
// no test claims anything about speed.
const EventuallyTimeout = 2 * time.Minute

// Eventually polls cond until it holds, and fails the test if it does not
// within EventuallyTimeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, EventuallyTimeout, what, cond)
}

// EventuallyWithin is Eventually for a wait whose pace a test sets on
// purpose (a rate limit over hundreds of writes), not the machine: within
// bounds how long before it calls the wait a hang.
func EventuallyWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LogBuffer collects log output (a slog handler's writer) for assertions.
// It is safe for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Lines returns the non-empty lines that contain every one of substr.
func (l *LogBuffer) Lines(substr ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range substr {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// WAT assembles a WebAssembly text file with wat2wasm ($WAT2WASM). A
// missing wat2wasm fails the test and says what to install: tests never
// skip for it.
func WAT(t testing.TB, src string) []byte {
	t.Helper()
	bin, err := exec.LookPath(cmp.Or(os.Getenv("WAT2WASM"), "wat2wasm"))
	if err != nil {
		t.Fatalf("wat2wasm not found: install wabt (apt-get install wabt; .ci/run does)")
	}
	out := filepath.Join(t.TempDir(), "out.wasm")
	if b, err := exec.Command(bin, src, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", src, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WATText is WAT for a module written inline in a test.
func WATText(t testing.TB, text string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "module.wat")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return WAT(t, path)
}
