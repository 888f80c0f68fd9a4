package engine

import (
	"context"
	"encoding/binary"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// memBucket is the state port over a map, keeping the rules of the host's
// store that the state functions' codes depend on: versions that only
// grow (never reused after a delete), compare-and-swap (a missing key is
// at version 0), and a quota of bytes (keys plus values) and of keys that
// only a growing write runs into. The host's adapter over the real store
// is tested in host/internal/stateport. Tests call it from one goroutine.
type memBucket struct {
	maxBytes, maxKeys int // 0: no limit
	last              int64
	bytes             int
	entries           map[string]memEntry
}

type memEntry struct {
	value   []byte
	version int64
}

func newBucket(maxBytes, maxKeys int) *memBucket {
	return &memBucket{maxBytes: maxBytes, maxKeys: maxKeys, entries: map[string]memEntry{}}
}

func (b *memBucket) Get(key []byte) ([]byte, int64, bool) {
	e, ok := b.entries[string(key)]
	return e.value, e.version, ok
}

func (b *memBucket) Set(key, value []byte, ifVersion int64) (int64, int32) {
	old, exists := b.entries[string(key)]
	if ifVersion != abi.StateAnyVersion && old.version != ifVersion {
		return 0, abi.ErrConflict
	}
	grow := len(value) - len(old.value)
	if !exists {
		grow += len(key)
	}
	if grow > 0 && b.maxBytes > 0 && b.bytes+grow > b.maxBytes {
		return 0, abi.ErrQuota
	}
	if !exists && b.maxKeys > 0 && len(b.entries)+1 > b.maxKeys {
		return 0, abi.ErrQuota
	}
	b.last++
	b.entries[string(key)] = memEntry{value: append([]byte(nil), value...), version: b.last}
	b.bytes += grow
	return b.last, 0
}

func (b *memBucket) Delete(key []byte, ifVersion int64) int32 {
	old, exists := b.entries[string(key)]
	switch {
	case ifVersion != abi.StateAnyVersion && old.version != ifVersion:
		return abi.ErrConflict
	case !exists:
		return abi.ErrAbsent
	}
	delete(b.entries, string(key))
	b.bytes -= len(key) + len(old.value)
	return 0
}

func (b *memBucket) List(prefix, after []byte, limit int, fn func(key string) bool) int {
	var keys []string
	for k := range b.entries {
		if strings.HasPrefix(k, string(prefix)) && k > string(after) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	n := 0
	for _, k := range keys[:min(len(keys), limit)] {
		n++
		if !fn(k) {
			break
		}
	}
	return n
}

// stateInstance is an instance of the state fixture with bucket b (nil:
// not granted); denied records OnDenied calls.
func stateInstance(t testing.TB, b StateBucket, denied *[]string) *Instance {
	t.Helper()
	e := newEngine(t, Options{})
	m := load(t, e, "state", Limits{MemoryPages: 2})
	o := InstanceOptions{LogRate: LogRate{PerSecond: -1}, OnDenied: func(c, f string) { *denied = append(*denied, c+"/"+f) }}
	if b != nil {
		o.State = b
	}
	return instantiate(t, m, o)
}

// call runs host function fn of inst with the given raw parameters and
// returns stack[0].
func call(inst *Instance, fn api.GoModuleFunc, params ...uint64) uint64 {
	stack := make([]uint64, max(len(params), 1))
	copy(stack, params)
	fn(inst.ctx, inst.mod, stack)
	return stack[0]
}

func put(inst *Instance, at uint32, s string) (ptr, n uint64) {
	inst.mod.Memory().Write(at, []byte(s))
	return uint64(at), uint64(len(s))
}

func u64(v int64) uint64 { return uint64(v) }

// The plugin's view: its counter and records live in the host's bucket,
// so a second instance (as after a trap or a reload) continues them.
func TestStateThroughPlugin(t *testing.T) {
	b := newBucket(0, 0)
	var denied []string
	for round := 1; round <= 2; round++ {
		inst := stateInstance(t, b, &denied)
		res, err := inst.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
		if err != nil || res.Code != CodeOK {
			t.Fatalf("round %d: %+v %v", round, res, err)
		}
		v, _, ok := b.Get([]byte("n"))
		if !ok || binary.LittleEndian.Uint64(v) != uint64(round) {
			t.Fatalf("round %d: n = %x, want %d", round, v, round)
		}
		if v, _, _ := b.Get([]byte("obj/p")); string(v) != "p" {
			t.Fatalf("obj/p = %q", v)
		}
	}
	// Not granted: ERR_DENIED, reported to OnDenied; nothing stored.
	inst := stateInstance(t, nil, &denied)
	res, err := inst.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
	if err != nil || res.Code != CodeError || res.Message != "state: ERR_DENIED" {
		t.Fatalf("not granted: %+v %v", res, err)
	}
	if len(denied) != 1 || denied[0] != "state/state_get" {
		t.Fatalf("OnDenied calls: %v", denied)
	}
}

func TestStateFunctionCodes(t *testing.T) {
	b := newBucket(64, 3)
	var denied []string
	inst := stateInstance(t, b, &denied)
	none := stateInstance(t, nil, &denied)
	const far = 1 << 30 // outside a 2-page memory
	kp, kn := put(inst, 100, "k")
	vp, vn := put(inst, 200, "hello")
	big := uint64(300) // 100 bytes of whatever: over the quota with the key
	if _, _, ok := b.Get([]byte("k")); ok {
		t.Fatal("bucket not empty")
	}
	set := func(i *Instance, key, keyLen, val, valLen uint64, ifv int64) int64 {
		return int64(call(i, stateSet, key, keyLen, val, valLen, u64(ifv)))
	}
	v1 := set(inst, kp, kn, vp, vn, -1)
	if v1 <= 0 {
		t.Fatalf("set: %d", v1)
	}
	cases := []struct {
		name string
		got  func() int64
		want int64
	}{
		{"set: key out of bounds, before denied", func() int64 { return set(none, far, 1, vp, vn, -1) }, int64(abi.ErrBounds)},
		{"set: negative value length", func() int64 { return set(inst, kp, kn, vp, u64(int64(uint32(1<<31))), -1) }, int64(abi.ErrBounds)},
		{"set: denied", func() int64 { return set(none, kp, kn, vp, vn, -1) }, int64(abi.ErrDenied)},
		{"set: empty key", func() int64 { return set(inst, kp, 0, vp, vn, -1) }, int64(abi.ErrInvalid)},
		{"set: key too long", func() int64 { return set(inst, 0, abi.StateMaxKeyLen+1, vp, vn, -1) }, int64(abi.ErrInvalid)},
		{"set: version -2", func() int64 { return set(inst, kp, kn, vp, vn, -2) }, int64(abi.ErrInvalid)},
		{"set: create-only on an existing key", func() int64 { return set(inst, kp, kn, vp, vn, 0) }, int64(abi.ErrConflict)},
		{"set: stale version", func() int64 { return set(inst, kp, kn, vp, vn, v1+1) }, int64(abi.ErrConflict)},
		{"set: over the byte quota", func() int64 { return set(inst, kp, kn, big, 100, -1) }, int64(abi.ErrQuota)},
		{"delete: out of bounds", func() int64 { return int64(int32(call(inst, stateDelete, far, 1, u64(-1)))) }, int64(abi.ErrBounds)},
		{"delete: denied", func() int64 { return int64(int32(call(none, stateDelete, kp, kn, u64(-1)))) }, int64(abi.ErrDenied)},
		{"delete: version 0", func() int64 { return int64(int32(call(inst, stateDelete, kp, kn, 0))) }, int64(abi.ErrInvalid)},
		{"delete: missing key", func() int64 {
			p, n := put(inst, 400, "nope")
			return int64(int32(call(inst, stateDelete, p, n, u64(-1))))
		}, int64(abi.ErrAbsent)},
		{"delete: stale version", func() int64 { return int64(int32(call(inst, stateDelete, kp, kn, u64(v1+1)))) }, int64(abi.ErrConflict)},
		{"get: version pointer out of bounds", func() int64 { return int64(int32(call(inst, stateGet, kp, kn, 500, 8, far))) }, int64(abi.ErrBounds)},
		{"get: denied", func() int64 { return int64(int32(call(none, stateGet, kp, kn, 500, 8, 600))) }, int64(abi.ErrDenied)},
		{"get: missing key", func() int64 {
			p, n := put(inst, 400, "nope")
			return int64(int32(call(inst, stateGet, p, n, 500, 8, 600)))
		}, int64(abi.ErrAbsent)},
		{"list: max 0", func() int64 { return int64(call(inst, stateList, 0, 0, 0, 0, 0, 500, 64)) }, int64(abi.ErrInvalid)},
		{"list: denied", func() int64 { return int64(call(none, stateList, 0, 0, 0, 0, 10, 500, 64)) }, int64(abi.ErrDenied)},
		{"list: output out of bounds", func() int64 { return int64(call(inst, stateList, 0, 0, 0, 0, 10, far, 64)) }, int64(abi.ErrBounds)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(); got != tc.want {
				t.Fatalf("got %d (%s), want %d (%s)", got, abi.ErrorName(int32(got)), tc.want, abi.ErrorName(int32(tc.want)))
			}
		})
	}
	if v, ver, _ := b.Get([]byte("k")); string(v) != "hello" || ver != v1 {
		t.Fatalf("failed calls changed the key: %q@%d", v, ver)
	}

	// get: the size protocol; the version is written even when the value does not fit.
	mem := inst.mod.Memory()
	if got := int32(call(inst, stateGet, kp, kn, 500, 2, 600)); got != 5 {
		t.Fatalf("get into 2 bytes: %d, want size 5", got)
	}
	if ver, _ := mem.ReadUint64Le(600); int64(ver) != v1 {
		t.Fatalf("version %d, want %d", ver, v1)
	}
	if got := int32(call(inst, stateGet, kp, kn, 500, 5, 600)); got != 5 {
		t.Fatalf("get: %d", got)
	}
	if v, _ := mem.Read(500, 5); string(v) != "hello" {
		t.Fatalf("get wrote %q", v)
	}
	v2 := set(inst, kp, kn, vp, 2, v1)
	if v2 <= v1 {
		t.Fatalf("set at the current version: %d", v2)
	}
	if got := int32(call(inst, stateDelete, kp, kn, u64(v2))); got != 0 {
		t.Fatalf("delete at the current version: %d", got)
	}

	// list: pages of whole keys, u32 length + bytes each.
	for _, k := range []string{"a/1", "a/2", "b"} {
		p, n := put(inst, 400, k)
		if set(inst, p, n, 0, 0, -1) <= 0 {
			t.Fatalf("set %s", k)
		}
	}
	pp, pn := put(inst, 100, "a/")
	r := int64(call(inst, stateList, pp, pn, 0, 0, 10, 500, 4))
	count, size, code := abi.UnpackList(r)
	if code != 0 || count != 2 || size != 14 {
		t.Fatalf("list into 4 bytes: count %d size %d code %d, want 2, 14", count, size, code)
	}
	r = int64(call(inst, stateList, pp, pn, 0, 0, 10, 500, 14))
	if count, size, _ = abi.UnpackList(r); count != 2 || size != 14 {
		t.Fatalf("list: %d %d", count, size)
	}
	out, _ := mem.Read(500, 14)
	want := "\x03\x00\x00\x00a/1\x03\x00\x00\x00a/2"
	if string(out) != want {
		t.Fatalf("list wrote %q, want %q", out, want)
	}
	ap, an := put(inst, 200, "a/1")
	r = int64(call(inst, stateList, pp, pn, ap, an, 1, 500, 64))
	if count, size, _ = abi.UnpackList(r); count != 1 || size != 7 {
		t.Fatalf("list after a/1: %d %d", count, size)
	}
	if out, _ := mem.Read(504, 3); string(out) != "a/2" {
		t.Fatalf("second page %q", out)
	}
}

// FuzzStateFunctions is FuzzHostFunctions for the state functions: random
// pointers, lengths, versions and payloads, granted or not. No panic, only
// documented codes, no write outside the output buffers.
func FuzzStateFunctions(f *testing.F) {
	f.Add(uint8(0), uint32(0), int32(1), uint32(100), int32(8), uint32(200), int64(-1), []byte("k"), true)
	f.Add(uint8(1), uint32(0), int32(1), uint32(100), int32(100), uint32(200), int64(0), []byte("key"), true)
	f.Add(uint8(2), uint32(0xfffffff0), int32(32), uint32(16), int32(-1), uint32(0), int64(5), []byte(""), false)
	f.Add(uint8(3), uint32(0), int32(0), uint32(300), int32(64), uint32(131071), int64(1000), []byte("a"), true)
	b := newBucket(4096, 50)
	var denied []string
	granted := stateInstance(f, b, &denied)
	none := stateInstance(f, nil, &denied)
	f.Fuzz(func(t *testing.T, fn uint8, keyPtr uint32, keyLen int32, ptr uint32, n int32, verPtr uint32, ifVersion int64, payload []byte, grant bool) {
		inst := none
		if grant {
			inst = granted
		}
		mem := inst.mod.Memory()
		size := mem.Size()
		buf, _ := mem.Read(0, size)
		for i := range buf {
			buf[i] = 0xCD
		}
		if len(payload) > 0 && uint64(keyPtr)+uint64(len(payload)) <= uint64(size) {
			mem.Write(keyPtr, payload)
		}
		before := append([]byte(nil), buf...)
		in := func(p uint32, l int32) bool { return l >= 0 && uint64(p)+uint64(l) <= uint64(size) }
		var res int64
		var outs [][2]int64 // regions the call may write
		switch fn % 4 {
		case 0:
			res = int64(int32(call(inst, stateGet, uint64(keyPtr), uint64(uint32(keyLen)), uint64(ptr), uint64(uint32(n)), uint64(verPtr))))
			if !in(keyPtr, keyLen) || !in(ptr, n) || !in(verPtr, 8) {
				if res != int64(abi.ErrBounds) {
					t.Fatalf("get out of bounds: %d", res)
				}
			}
			if res >= 0 {
				outs = append(outs, [2]int64{int64(verPtr), 8})
				if res <= int64(n) {
					outs = append(outs, [2]int64{int64(ptr), res})
				}
			}
		case 1:
			res = int64(call(inst, stateSet, uint64(keyPtr), uint64(uint32(keyLen)), uint64(ptr), uint64(uint32(n)), uint64(ifVersion)))
			if (!in(keyPtr, keyLen) || !in(ptr, n)) && res != int64(abi.ErrBounds) {
				t.Fatalf("set out of bounds: %d", res)
			}
		case 2:
			res = int64(int32(call(inst, stateDelete, uint64(keyPtr), uint64(uint32(keyLen)), uint64(ifVersion))))
			if !in(keyPtr, keyLen) && res != int64(abi.ErrBounds) {
				t.Fatalf("delete out of bounds: %d", res)
			}
		case 3:
			res = int64(call(inst, stateList, uint64(keyPtr), uint64(uint32(keyLen)), uint64(verPtr), uint64(uint32(keyLen/2)), uint64(uint32(ifVersion)), uint64(ptr), uint64(uint32(n))))
			if (!in(keyPtr, keyLen) || !in(verPtr, keyLen/2) || !in(ptr, n)) && res != int64(abi.ErrBounds) {
				t.Fatalf("list out of bounds: %d", res)
			}
			if res >= 0 {
				count, sz, _ := abi.UnpackList(res)
				if count > abi.StateMaxList {
					t.Fatalf("list returned %d keys", count)
				}
				if int64(sz) <= int64(n) {
					outs = append(outs, [2]int64{int64(ptr), int64(sz)})
				}
			}
		}
		if res < 0 && abi.ErrorName(int32(res)) == "" {
			t.Fatalf("fn %d: undocumented error %d", fn%4, res)
		}
		if !grant && res >= 0 {
			t.Fatalf("fn %d: not granted, returned %d", fn%4, res)
		}
		after, _ := mem.Read(0, size)
		for i := range after {
			if after[i] == before[i] {
				continue
			}
			ok := false
			for _, o := range outs {
				ok = ok || (int64(i) >= o[0] && int64(i) < o[0]+o[1])
			}
			if !ok {
				t.Fatalf("fn %d wrote byte %d outside its buffers %v", fn%4, i, outs)
			}
		}
	})
}

// BenchmarkState is get and set of a 100-byte value from a guest, through
// the host functions, next to the same on a Go map: the cost a plugin
// pays for state (target ≤ 1 µs a call). Each guest call loops 1000
// times, so the figure is per host function call, not per guest entry.
func BenchmarkState(b *testing.B) {
	const loop = 1000
	bucket := newBucket(0, 0)
	var denied []string
	inst := stateInstance(b, bucket, &denied)
	if _, code := bucket.Set([]byte("bench"), make([]byte, 100), abi.StateAnyVersion); code != 0 {
		b.Fatal(abi.ErrorName(code))
	}
	for _, name := range []string{"get", "set"} {
		fn := inst.mod.ExportedFunction("bench_" + name)
		b.Run("host/"+name, func(b *testing.B) {
			for b.Loop() {
				// Through call, as Handle does: it starts each call's count
				// of host calls afresh. Called directly, the counts added
				// up past MaxHostCallsPerCall within 100 iterations, and
				// the instance was killed.
				inst.stack[0] = loop
				if err := inst.call(fn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*loop), "ns/call")
		})
	}
	m := map[string][]byte{"bench": make([]byte, 100)}
	val := make([]byte, 100)
	out := make([]byte, 128)
	key := []byte("bench")
	b.Run("gomap/get", func(b *testing.B) {
		for b.Loop() {
			for range loop {
				copy(out, m[string(key)])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*loop), "ns/call")
	})
	b.Run("gomap/set", func(b *testing.B) {
		for b.Loop() {
			for range loop {
				m[string(key)] = append([]byte(nil), val...)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*loop), "ns/call")
	})
}

// The Go kit against the real host functions: a compare-and-swap counter
// per namespace, a value past the kit's first buffer, paged listing, and
// ERR_DENIED without the grant.
func TestStateGoKit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go plugin")
	}
	wasm := examples.get(t, "gostate")
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "gostate.wasm", wasm, Limits{MemoryPages: 256, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	b := newBucket(0, 0)
	var logs logBuffer
	inst := instantiate(t, m, InstanceOptions{State: b, Logger: newLogger(&logs), LogRate: LogRate{PerSecond: -1}})
	for _, ev := range []*Envelope{
		addEvent(pod("a", "p1", "Running")), addEvent(pod("a", "p2", "Running")), addEvent(pod("b", "p3", "Running")),
		addEvent(pod("a", "p4", "Running")), addEvent(pod("c", "list", "Running")),
	} {
		if res, err := inst.Handle(context.Background(), ev); err != nil || res.Code != CodeOK {
			t.Fatalf("handle: %+v %v\n%s", res, err, logs.String())
		}
	}
	for k, want := range map[string]string{"pods/a": "3", "pods/b": "1", "pods/c": ""} { // "list" only lists
		if v, _, _ := b.Get([]byte(k)); string(v) != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if _, _, ok := b.Get([]byte("big")); ok {
		t.Error("big not deleted")
	}
	if logs.count("keys=pods/a,pods/b") != 1 {
		t.Errorf("listing: %s", logs.String())
	}

	none := instantiate(t, m, InstanceOptions{LogRate: LogRate{PerSecond: -1}})
	res, err := none.Handle(context.Background(), addEvent(pod("a", "p1", "Running")))
	if err != nil || res.Code != CodeError || !strings.Contains(res.Message, "ERR_DENIED") {
		t.Fatalf("not granted: %+v %v", res, err)
	}
}
