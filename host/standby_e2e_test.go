package host

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// A standby host compiles what it loads and delivers nothing;
// a new version or a broken one while it waits changes only what it
// holds; Activate starts the held versions without compiling them again,
// and each gets the cluster's current state as its initial list, then
// live events.
func TestStandbyHoldsThenActivates(t *testing.T) {
	counter := testPlugin(t, "counter")
	hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": counter, "gone.wasm": counter},
		func(hs *harness) { hs.standby = true })
	if err != nil {
		t.Fatal(err)
	}
	a := hs.createCM("a", nil)
	b := hs.createCM("b", nil)
	hs.deleteCM(a.Name)
	b = hs.updateCM(b, "k", "v")

	if !hs.h.Standby() {
		t.Fatal("the host is not a standby")
	}
	for _, name := range []string{"counter.wasm", "gone.wasm"} {
		st := hs.status(name)
		if st.State != StateStandby || st.SHA256 == "" || !slices.Equal(st.Bindings, []string{"cms"}) {
			t.Errorf("%s: %+v, want state standby, compiled, bound to cms", name, st)
		}
	}
	// A new version replaces the held one; a broken one is refused and
	// the held one stays; a removed file drops what was held.
	next := append(slices.Clone(counter), 0x00, 0x05, 0x03, 'n', 'e', 'w', 0x01) // a custom section
	hs.write("counter.wasm", next)
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "counter.wasm")); err != nil {
		t.Fatal(err)
	}
	held := hs.status("counter.wasm").SHA256
	hs.write("counter.wasm", []byte("not wasm"))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "counter.wasm")); err == nil {
		t.Fatal("a broken module was loaded")
	}
	if st := hs.status("counter.wasm"); st.State != StateStandby || st.SHA256 != held || st.LastError == "" {
		t.Errorf("after a refused version: %+v, want the held version %s in state standby, with the error", st, held[:12])
	}
	hs.h.Unload("gone.wasm")
	if n := len(hs.rec.of("counter.wasm")) + len(hs.rec.of("gone.wasm")); n != 0 {
		t.Fatalf("a standby delivered %d calls", n)
	}

	// The initial list is the cache at activation: wait until the cache
	// has b's update and a's delete, so no live event can follow it.
	eventually(t, "the host's cache to hold b's update and not a", func() bool {
		got, ok := hs.p.CacheGet("cms", hs.ns, b.Name)
		_, aThere := hs.p.CacheGet("cms", hs.ns, a.Name)
		return ok && got.GetResourceVersion() == b.ResourceVersion && !aThere
	})
	compiles := len(hs.logs.lines("compiled plugin", "plugin=counter.wasm"))
	if err := hs.h.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hs.h.Standby() {
		t.Error("still a standby after Activate")
	}
	eventually(t, "the activated plugin to be synced", func() bool { return hs.status("counter.wasm").Synced })
	st := hs.status("counter.wasm")
	if st.State != StateRunning || st.SHA256 != held {
		t.Errorf("after Activate: %+v, want the held version %s running", st, held[:12])
	}
	if n := len(hs.logs.lines("compiled plugin", "plugin=counter.wasm")); n != compiles {
		t.Errorf("Activate compiled the plugin again (%d compiles, %d before)", n, compiles)
	}
	want := []observed{{Type: 1, Key: hs.ns + "/b", RV: b.ResourceVersion, Initial: true, Resource: "cms"}}
	var got []observed
	for _, d := range hs.rec.of("counter.wasm") {
		if d.Type != 0 {
			d.Code, d.Failure = 0, 0
			got = append(got, d)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("initial list after Activate: %v, want %v", got, want)
	}
	if len(hs.rec.of("gone.wasm")) != 0 {
		t.Error("an unloaded standby plugin was started")
	}
	c := hs.createCM("c", nil)
	eventually(t, "a live event after Activate", func() bool {
		for _, d := range hs.rec.of("counter.wasm") {
			if d.Key == hs.ns+"/c" && d.RV == c.ResourceVersion && !d.Initial {
				return true
			}
		}
		return false
	})
}
