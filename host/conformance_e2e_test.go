package host

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/host/internal/engine"
)

const conformanceConfig = `
apiVersion: informer-host/v1
resources:
  - name: cms
    version: v1
    resource: configmaps
    namespaces: [NS]
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    delivery: {maxRetries: 2, retryBackoff: 1ms}
    limits:
      memoryPages: 64
      callTimeout: 200ms
      maxConsecutiveFailures: 3
      restartBackoff: 10ms
      maxRestartBackoff: 40ms
  modules:
    # Deep recursion is slow under the race detector; the failure wanted
    # here is the stack overflow, not a timeout.
    - file: stackoverflow.wasm
      limits: {callTimeout: 30s}
`

// Every conformance fixture is contained — refused at load with a message
// naming the file and the problem, or failing at run time, restarted with
// backoff and quarantined — while a healthy plugin beside them receives
// every event.
var droppedRE = regexp.MustCompile(`dropped=(\d+)`)

func TestConformanceFixturesAreContained(t *testing.T) {
	healthy := fixture(t, "healthy")
	plugins := map[string][]byte{
		"healthy.wasm":        healthy,
		"trap.wasm":           fixture(t, "trap"),
		"loop.wasm":           fixture(t, "loop"),
		"membomb.wasm":        fixture(t, "membomb"),
		"stackoverflow.wasm":  fixture(t, "stackoverflow"),
		"exit.wasm":           fixture(t, "exit"),
		"logspam.wasm":        fixture(t, "logspam"),
		"retry.wasm":          fixture(t, "retry"),
		"badptr.wasm":         fixture(t, "badptr"),
		"startloop.wasm":      fixture(t, "startloop"),
		"initloop.wasm":       fixture(t, "initloop"),
		"missing-handle.wasm": fixture(t, "missing-handle"),
		"unknown-import.wasm": fixture(t, "unknown-import"),
		"abi-v2.wasm":         fixture(t, "abi-v2"),
		"garbage.wasm":        []byte("#!/bin/sh\necho not wasm\n"),
		"truncated.wasm":      healthy[:len(healthy)-7],
	}
	hs, loadErr := newHarness(t, conformanceConfig, plugins)

	refused := map[string]string{
		"garbage.wasm":        "not a WebAssembly module",
		"truncated.wasm":      "truncated WebAssembly module",
		"missing-handle.wasm": "missing required export ih_handle",
		"unknown-import.wasm": "import",
		"abi-v2.wasm":         "v2",
		"startloop.wasm":      "timeout",
		"initloop.wasm":       "timeout",
	}
	for file, want := range refused {
		st := hs.status(file)
		if st.State != StateFailed || !strings.Contains(st.LastError, `"`+file+`"`) || !strings.Contains(st.LastError, want) {
			t.Errorf("%s: state %s, error %q; want failed, naming the file and %q", file, st.State, st.LastError, want)
		}
		if loadErr == nil || !strings.Contains(loadErr.Error(), file) {
			t.Errorf("LoadDir's error does not report %s", file)
		}
	}

	const n = 4
	for i := range n {
		hs.createCM(fmt.Sprintf("cm-%d", i), map[string]string{"i": fmt.Sprint(i)})
	}
	quarantined := map[string]func(Counters) uint64{
		"trap.wasm":          func(c Counters) uint64 { return c.Traps },
		"loop.wasm":          func(c Counters) uint64 { return c.Timeouts },
		"membomb.wasm":       func(c Counters) uint64 { return c.MemoryFailures },
		"stackoverflow.wasm": func(c Counters) uint64 { return c.Traps },
		"exit.wasm":          func(c Counters) uint64 { return c.Traps },
	}
	for file := range quarantined {
		eventually(t, file+" to be quarantined", func() bool { return hs.status(file).State == StateQuarantined })
	}
	// More events once the bad plugins are off: the healthy one must see
	// all of them, in order, and nothing else.
	for i := range n {
		hs.deleteCM(fmt.Sprintf("cm-%d", i))
	}
	hs.createCM("last", nil)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("add %s/cm-%d ok", hs.ns, i))
	}
	for i := range n {
		want = append(want, fmt.Sprintf("delete %s/cm-%d ok", hs.ns, i))
	}
	want = append(want, fmt.Sprintf("add %s/last ok", hs.ns))
	eventually(t, "healthy to see every event", func() bool { return len(hs.rec.of("healthy.wasm")) >= len(want) })
	if got := hs.rec.strings("healthy.wasm"); !slices.Equal(got, want) {
		t.Errorf("healthy plugin's deliveries:\n got %q\nwant %q", got, want)
	}
	if st := hs.status("healthy.wasm"); st.State != StateRunning || st.Counters.OK != uint64(len(want)) || st.Counters.Restarts != 0 {
		t.Errorf("healthy plugin: %+v", st)
	}

	for file, count := range quarantined {
		st := hs.status(file)
		// maxConsecutiveFailures 3: the first instance and two restarts
		// fail, then the plugin stays off.
		if c := count(st.Counters); c != 3 || st.Counters.Restarts != 2 || st.Counters.OK != 0 {
			t.Errorf("%s: %d failures of its kind, %d restarts, %d ok (counters %+v); want 3, 2, 0",
				file, c, st.Counters.Restarts, st.Counters.OK, st.Counters)
		}
		if got := len(hs.rec.of(file)); got != 3 {
			t.Errorf("%s: %d calls after quarantine began; want exactly the 3 that failed", file, got)
		}
		if lines := hs.logs.lines("plugin="+file, "plugin failed"); len(lines) != 3 {
			t.Errorf("%s: %d failure log lines, want 3", file, len(lines))
		}
	}
	if lines := hs.logs.lines("plugin=trap.wasm", "plugin failed", "wasmStack="); len(lines) == 0 {
		t.Error("a trap's log line carries no wasm stack trace")
	}
	if lines := hs.logs.lines("plugin=loop.wasm", "kind=timeout"); len(lines) == 0 {
		t.Error("the looping plugin's failures are not logged as timeouts")
	}

	// retry: every event is offered 1 + maxRetries times, then dropped.
	eventually(t, "retry plugin to give up on every event", func() bool {
		return hs.status("retry.wasm").Counters.RetryExhausted == uint64(len(want))
	})
	if st := hs.status("retry.wasm"); st.Counters.Retries != 2*uint64(len(want)) || st.State != StateRunning {
		t.Errorf("retry plugin: %+v", st)
	}
	if lines := hs.logs.lines("plugin=retry.wasm", "not ready yet"); len(lines) == 0 {
		t.Error("the retry plugin's message is not logged")
	}

	// logspam keeps running, its output rate limited; badptr's checks of
	// the host functions' answers to bad pointers and lengths all pass.
	for _, file := range []string{"logspam.wasm", "badptr.wasm"} {
		eventually(t, file+" to handle every event", func() bool { return hs.status(file).Counters.OK == uint64(len(want)) })
		if st := hs.status(file); st.State != StateRunning || st.Counters.Delivered != st.Counters.OK {
			t.Errorf("%s: %+v", file, st)
		}
	}
	// 2000 lines per event were written. The default limit lets the first
	// burst through whole, then drops lines, reporting how many with the
	// next line it lets through: every line is logged, reported dropped,
	// or dropped since the last report. (The refill rate itself is the
	// engine's unit test, on a fake clock.)
	written := 2000 * int(hs.status("logspam.wasm").Counters.OK)
	logged := len(hs.logs.lines("plugin=logspam.wasm", "spam"))
	dropped := 0
	for _, l := range hs.logs.lines("plugin=logspam.wasm", "lines dropped") {
		n, _ := strconv.Atoi(droppedRE.FindStringSubmatch(l)[1])
		dropped += n
	}
	if logged < engine.DefaultLogBurst || logged >= written || dropped == 0 || logged+dropped > written {
		t.Errorf("logspam: %d lines written, %d logged, %d reported dropped; want at least the burst of %d logged, the rest dropped and none counted twice",
			written, logged, dropped, engine.DefaultLogBurst)
	}
}
