package host

import (
	"slices"
	"strings"
	"testing"
)

// batchSizes are the sizes of the calls the batch fixture logged, in
// order: 1 for an ih_handle call, the count for an ih_handle_batch call.
func batchSizes(hs *harness) []string {
	var out []string
	for _, l := range hs.logs.lines(`msg="batch `, "plugin=batch.wasm") {
		_, rest, _ := strings.Cut(l, `msg="batch `)
		n, _, _ := strings.Cut(rest, `"`)
		out = append(out, n)
	}
	return out
}

// batchHarness runs the batch fixture, bound to ConfigMaps with extra
// default settings, its worker gated after every call until open.
func batchHarness(t *testing.T, extra string) (hs *harness, held <-chan struct{}, open func()) {
	t.Helper()
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
`+extra, map[string][]byte{"batch.wasm": fixture(t, "batch")}, func(hs *harness) { held, open = hs.rec.gate("batch.wasm") })
	if err != nil {
		t.Fatal(err)
	}
	return hs, held, open
}

// A plugin exporting ih_handle_batch gets what is already queued in one
// call, at most one event per object, and a lone event alone; each
// object's events keep their order. The sizes are the ones the guest saw.
func TestBatchOnlyUnderBacklog(t *testing.T) {
	hs, held, open := batchHarness(t, "")
	hs.createCM("a0", nil)
	<-held // the worker hangs on to a0's call, as a slow plugin would
	b1 := hs.createCM("b1", nil)
	hs.createCM("b2", nil)
	hs.createCM("b3", nil)
	b1 = hs.updateCM(b1, "n", "1")
	hs.updateCM(b1, "n", "2")
	eventually(t, "five events to wait", func() bool { return hs.status("batch.wasm").Queue.Depth == 5 })
	open()
	eventually(t, "the backlog to be handled", func() bool { return len(hs.rec.of("batch.wasm")) == 6 })
	// b1, b2, b3 in one call, which ends before b1's update (an object
	// is in a batch once); b1's two updates then go one after the other.
	if got, want := batchSizes(hs), []string{"1", "3", "1", "1"}; !slices.Equal(got, want) {
		t.Errorf("the guest saw calls of %q events, want %q", got, want)
	}
	ns := hs.ns
	want := []string{"add " + ns + "/a0 ok", "add " + ns + "/b1 ok", "add " + ns + "/b2 ok", "add " + ns + "/b3 ok",
		"update " + ns + "/b1 ok", "update " + ns + "/b1 ok"}
	if got := hs.rec.strings("batch.wasm"); !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	// Nothing waits: a lone event goes alone, through ih_handle.
	hs.createCM("z", nil)
	eventually(t, "the lone event", func() bool { return len(hs.rec.of("batch.wasm")) == 7 })
	if got := batchSizes(hs); got[len(got)-1] != "1" {
		t.Errorf("a lone event was handed in a call of %s", got[len(got)-1])
	}
}

// A failure mid-batch settles the events the plugin handled before it
// (an ERROR among them is that event's own answer), fails the event being
// handled (parked here, parkAfter 1) and the fresh instance gets the rest
// from the cache.
func TestBatchFailureMidBatch(t *testing.T) {
	hs, held, open := batchHarness(t, "    limits: {restartBackoff: 10ms, parkAfter: 1}\n")
	hs.createCM("a0", nil)
	<-held
	for _, n := range []string{"b1", "e2", "c3", "t4", "d5"} {
		hs.createCM(n, nil)
	}
	eventually(t, "five events to wait", func() bool { return hs.status("batch.wasm").Queue.Depth == 5 })
	open()
	ns := hs.ns
	eventually(t, "d5 from the fresh instance's replay", func() bool {
		return slices.Contains(hs.rec.strings("batch.wasm"), "add "+ns+"/d5 initial ok")
	})
	got := hs.rec.strings("batch.wasm")
	if want := []string{"add " + ns + "/a0 ok", "add " + ns + "/b1 ok", "add " + ns + "/e2 error", "add " + ns + "/c3 ok",
		"add " + ns + "/t4 trap"}; !slices.Equal(got[:5], want) {
		t.Errorf("before the restart: %q, want %q", got[:5], want)
	}
	if sizes := batchSizes(hs); len(sizes) < 2 || sizes[1] != "5" {
		t.Errorf("the guest saw calls of %q events, want the second of 5", sizes)
	}
	for _, d := range got[5:] {
		if strings.Contains(d, "/t4") || strings.Contains(d, "/e2") {
			t.Errorf("parked object handed again: %s", d)
		}
		if !strings.Contains(d, " initial ") {
			t.Errorf("after the restart, %s is not from the replay", d)
		}
	}
	if st := hs.status("batch.wasm"); st.Counters.Restarts != 1 {
		t.Errorf("%d restarts, want 1", st.Counters.Restarts)
	}
}
