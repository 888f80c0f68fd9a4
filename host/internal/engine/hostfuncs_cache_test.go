package engine

import (
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/informer-host/informer-host/abi"
)

// fakeCache is a CacheReader over a fixed set of objects of one granted
// resource, "pods", with the owner index granted. The host's real reader
// (host/cacheread.go) is tested against the apiserver; this one lets the
// engine's side be fuzzed.
type fakeCache struct {
	objs   map[string]map[string]any // by "namespace/name"
	denied []string                  // OnDenied calls, "capability function"
}

func newFakeCache() *fakeCache {
	c := &fakeCache{objs: map[string]map[string]any{}}
	for _, p := range []struct{ ns, name, phase string }{{"ns", "p1", "Running"}, {"ns", "p2", "Pending"}, {"other", "p3", "Running"}} {
		u := pod(p.ns, p.name, p.phase)
		u.SetLabels(map[string]string{"phase": p.phase})
		u.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"uid": "rs-1"}}
		c.objs[p.ns+"/"+p.name] = u.Object
	}
	return c
}

func (c *fakeCache) Get(res, ns, name []byte) (map[string]any, int32) {
	if string(res) != "pods" {
		return nil, abi.ErrDenied
	}
	o := c.objs[string(ns)+"/"+string(name)]
	if o == nil {
		return nil, abi.ErrAbsent
	}
	return o, 0
}

func (c *fakeCache) List(keys []string, res, ns, sel []byte) ([]string, int32) {
	if string(res) != "pods" {
		return keys, abi.ErrDenied
	}
	s, err := labels.Parse(string(sel))
	if err != nil {
		return keys, abi.ErrInvalid
	}
	for k, o := range c.objs {
		md := o["metadata"].(map[string]any)
		l := labels.Set{}
		for lk, lv := range md["labels"].(map[string]any) {
			l[lk] = lv.(string)
		}
		if (len(ns) == 0 || md["namespace"] == string(ns)) && s.Matches(l) {
			keys = append(keys, k)
		}
	}
	return keys, 0
}

func (c *fakeCache) Index(keys []string, res, index, value []byte) ([]string, int32) {
	if string(res) != "pods" {
		return keys, abi.ErrDenied
	}
	switch string(index) {
	case "namespace":
		return c.List(keys, res, value, nil)
	case "owner":
		if string(value) == "rs-1" {
			for k := range c.objs {
				keys = append(keys, k)
			}
		}
		return keys, 0
	}
	return keys, abi.ErrInvalid
}

func TestCacheFunctionsDirect(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fc := newFakeCache()
	i := instantiate(t, m, InstanceOptions{Cache: fc, OnDenied: func(c, f string) { fc.denied = append(fc.denied, c+" "+f) }})
	denyAll := instantiate(t, m, InstanceOptions{OnDenied: func(c, f string) { fc.denied = append(fc.denied, "none "+c+" "+f) }})
	mem := i.mod.Memory()
	put := func(inst *Instance, at uint32, s string) (uint64, uint64) {
		inst.mod.Memory().Write(at, []byte(s))
		return uint64(at), uint64(len(s))
	}
	get := func(inst *Instance, res, ns, name string) int32 {
		st := make([]uint64, 6)
		st[0], st[1] = put(inst, 0, res)
		st[2], st[3] = put(inst, 100, ns)
		st[4], st[5] = put(inst, 200, name)
		cacheGet(inst.ctx, inst.mod, st)
		return int32(uint32(st[0]))
	}
	list := func(inst *Instance, fn func(*Instance, []uint64), res, a, b string, start int32, n int32) (int64, string) {
		st := make([]uint64, 9)
		st[0], st[1] = put(inst, 0, res)
		st[2], st[3] = put(inst, 100, a)
		st[4], st[5] = put(inst, 200, b)
		st[6], st[7], st[8] = uint64(uint32(start)), 1000, uint64(uint32(n))
		fn(inst, st)
		r := int64(st[0])
		_, size, code := abi.UnpackList(r)
		if code != 0 || int32(size) > n {
			return r, ""
		}
		out, _ := inst.mod.Memory().Read(1000, size)
		return r, string(out)
	}
	doList := func(inst *Instance, st []uint64) { cacheList(inst.ctx, inst.mod, st) }
	doIndex := func(inst *Instance, st []uint64) { cacheIndex(inst.ctx, inst.mod, st) }

	h := get(i, "pods", "ns", "p2")
	if h != abi.FirstHandle {
		t.Fatalf("cache_get = %d, want the first handle", h)
	}
	// The handle reads like the event's objects, with no event at all.
	fs := make([]uint64, 5)
	fs[0], fs[1], fs[2], fs[3], fs[4] = uint64(uint32(h)), 300, 0, 400, 64
	put(i, 300, "status.phase")
	fs[2] = uint64(len("status.phase"))
	fieldRead(i.ctx, i.mod, fs)
	if kind, size, code := abi.UnpackField(int64(fs[0])); code != 0 || kind != abi.KindString {
		t.Fatalf("field_read(handle) = %d", int64(fs[0]))
	} else if b, _ := mem.Read(400, size); string(b) != "Pending" {
		t.Fatalf("field_read(handle) read %q", b)
	}
	for _, tc := range []struct {
		res, ns, name string
		want          int32
	}{
		{"pods", "ns", "nope", abi.ErrAbsent},
		{"secrets", "ns", "p1", abi.ErrDenied},
		{"pods", "ns", "p1", abi.FirstHandle + 1},
	} {
		if got := get(i, tc.res, tc.ns, tc.name); got != tc.want {
			t.Errorf("cache_get(%s, %s, %s) = %d, want %d", tc.res, tc.ns, tc.name, got, tc.want)
		}
	}
	if got := get(denyAll, "pods", "ns", "p1"); got != abi.ErrDenied {
		t.Errorf("without a cache grant: cache_get = %d, want ERR_DENIED", got)
	}
	// A handle ends with the call that got it.
	i.st.dropHandles()
	fieldRead(i.ctx, i.mod, fs)
	if int32(int64(fs[0])) != abi.ErrInvalid {
		t.Errorf("field_read of a dropped handle = %d, want ERR_INVALID", int64(fs[0]))
	}

	for _, tc := range []struct {
		name    string
		fn      func(*Instance, []uint64)
		a, b    string
		start   int32
		n       int32
		total   uint32
		want    string
		wantErr int32
	}{
		{"namespace", doList, "ns", "", 0, 100, 2, "ns/p1\nns/p2\n", 0},
		{"all namespaces", doList, "", "", 0, 100, 3, "ns/p1\nns/p2\nother/p3\n", 0},
		{"selector", doList, "", "phase=Running", 0, 100, 2, "ns/p1\nother/p3\n", 0},
		{"page", doList, "", "", 1, 100, 3, "ns/p2\nother/p3\n", 0},
		{"past the end", doList, "", "", 9, 100, 3, "", 0},
		{"too small: size only", doList, "ns", "", 0, 5, 2, "", 0},
		{"bad selector", doList, "", "phase in (", 0, 100, 0, "", abi.ErrInvalid},
		{"negative start", doList, "", "", -1, 100, 0, "", abi.ErrInvalid},
		{"owner index", doIndex, "owner", "rs-1", 0, 100, 3, "ns/p1\nns/p2\nother/p3\n", 0},
		{"namespace index", doIndex, "namespace", "other", 0, 100, 1, "other/p3\n", 0},
		{"unknown index", doIndex, "labels", "x", 0, 100, 0, "", abi.ErrInvalid},
	} {
		r, text := list(i, tc.fn, "pods", tc.a, tc.b, tc.start, tc.n)
		total, size, code := abi.UnpackList(r)
		if code != tc.wantErr || (code == 0 && (total != tc.total || text != tc.want)) {
			t.Errorf("%s: total %d size %d code %d text %q; want total %d text %q code %d", tc.name, total, size, code, text, tc.total, tc.want, tc.wantErr)
		}
	}
	if r, _ := list(i, doList, "secrets", "", "phase in (", 0, 100); int32(r) != abi.ErrDenied {
		t.Errorf("ungranted resource with a bad selector: %d, want ERR_DENIED first", r)
	}
	if r, _ := list(denyAll, doIndex, "pods", "owner", "x", 0, 100); int32(r) != abi.ErrDenied {
		t.Errorf("without a cache grant: cache_index = %d, want ERR_DENIED", r)
	}
	want := []string{"cache cache_get", "none cache cache_get", "cache cache_list", "none cache cache_index"}
	if strings.Join(fc.denied, ",") != strings.Join(want, ",") {
		t.Errorf("OnDenied calls %q, want %q", fc.denied, want)
	}
}

// The errors of cache_get come in the order of ABI.md section 16: with
// every handle in use, an argument that cannot work (here: the call, for
// want of a handle) is ERR_INVALID whether or not the object exists; only
// a resource not granted comes before it.
func TestCacheGetErrorOrder(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	i := instantiate(t, m, InstanceOptions{Cache: newFakeCache()})
	get := func(res, ns, name string) int32 {
		for at, s := range map[uint32]string{0: res, 100: ns, 200: name} {
			i.mod.Memory().Write(at, []byte(s))
		}
		st := []uint64{0, uint64(len(res)), 100, uint64(len(ns)), 200, uint64(len(name))}
		cacheGet(i.ctx, i.mod, st)
		return int32(uint32(st[0]))
	}
	for range abi.MaxHandles {
		if h := get("pods", "ns", "p1"); h < abi.FirstHandle {
			t.Fatalf("cache_get = %d while filling the handles", h)
		}
	}
	for _, tc := range []struct {
		res, name string
		want      int32
	}{
		{"pods", "p1", abi.ErrInvalid},
		{"pods", "nope", abi.ErrInvalid},
		{"secrets", "p1", abi.ErrDenied},
	} {
		if got := get(tc.res, "ns", tc.name); got != tc.want {
			t.Errorf("handles full: cache_get(%s, ns, %s) = %s, want %s", tc.res, tc.name, abi.ErrorName(got), abi.ErrorName(tc.want))
		}
	}
}

// FuzzCacheFunctions hands arbitrary pointers, lengths, start indexes and
// names to cache_get, cache_list and cache_index, and reads arbitrary
// handles with field_read and object_read: no panic, only documented
// codes, no write outside the output buffer, and the size protocol.
func FuzzCacheFunctions(f *testing.F) {
	f.Add(uint8(0), uint32(0), int32(4), uint32(4), int32(2), uint32(6), int32(2), int32(0), uint32(512), int32(100), []byte("podsnsp1"))
	f.Add(uint8(1), uint32(0), int32(4), uint32(4), int32(0), uint32(6), int32(13), int32(0), uint32(512), int32(100), []byte("pods..phase=Running"))
	f.Add(uint8(1), uint32(0), int32(4), uint32(4), int32(2), uint32(6), int32(0), int32(1), uint32(512), int32(3), []byte("podsns"))
	f.Add(uint8(2), uint32(0), int32(4), uint32(4), int32(5), uint32(9), int32(4), int32(0), uint32(131000), int32(1000), []byte("podsownerrs-1"))
	f.Add(uint8(2), uint32(0xfffffff0), int32(32), uint32(4), int32(-1), uint32(9), int32(4), int32(-5), uint32(0), int32(-1), []byte("x"))
	f.Add(uint8(3), uint32(2), int32(0), uint32(0), int32(12), uint32(0), int32(0), int32(2), uint32(100), int32(200), []byte("status.phase"))
	f.Add(uint8(4), uint32(0), int32(0), uint32(0), int32(0), uint32(0), int32(0), int32(3), uint32(100), int32(2000), []byte(""))
	e := newEngine(f, Options{})
	m := load(f, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fc := newFakeCache()
	inst := instantiate(f, m, InstanceOptions{Cache: fc})
	f.Fuzz(func(t *testing.T, fn uint8, p0 uint32, n0 int32, p1 uint32, n1 int32, p2 uint32, n2 int32, start int32, ptr uint32, n int32, data []byte) {
		mem, size, before := fuzzMemory(inst, data)
		st := inst.st
		st.dropHandles()
		// One object to read by handle, whatever fn is.
		st.handles = append(st.handles, fc.objs["ns/p1"])
		defer st.dropHandles()
		ctx := inst.ctx
		stack := make([]uint64, 9)
		var res int64
		var written int64
		in := func(p uint32, l int32) bool { return l >= 0 && uint64(p)+uint64(l) <= uint64(size) }
		allIn := in(p0, n0) && in(p1, n1) && in(p2, n2)
		switch fn % 5 {
		case 0:
			stack[0], stack[1], stack[2], stack[3], stack[4], stack[5] = uint64(p0), uint64(uint32(n0)), uint64(p1), uint64(uint32(n1)), uint64(p2), uint64(uint32(n2))
			cacheGet(ctx, inst.mod, stack)
			res = int64(int32(stack[0]))
			if !allIn && res != int64(abi.ErrBounds) {
				t.Fatalf("cache_get: out-of-bounds region returned %d", res)
			}
			if res >= 0 && (res < int64(abi.FirstHandle) || res >= int64(abi.FirstHandle)+int64(len(st.handles))) {
				t.Fatalf("cache_get returned %d, not a live handle", res)
			}
		case 1, 2:
			stack[0], stack[1], stack[2], stack[3], stack[4], stack[5] = uint64(p0), uint64(uint32(n0)), uint64(p1), uint64(uint32(n1)), uint64(p2), uint64(uint32(n2))
			stack[6], stack[7], stack[8] = uint64(uint32(start)), uint64(ptr), uint64(uint32(n))
			if fn%5 == 1 {
				cacheList(ctx, inst.mod, stack)
			} else {
				cacheIndex(ctx, inst.mod, stack)
			}
			res = int64(stack[0])
			if (!allIn || !in(ptr, n)) && res != int64(abi.ErrBounds) {
				t.Fatalf("fn %d: out-of-bounds region returned %d", fn%5, res)
			}
			if res >= 0 {
				total, sz, _ := abi.UnpackList(res)
				if total > uint32(len(fc.objs)) {
					t.Fatalf("total %d", total)
				}
				if int64(sz) <= int64(n) {
					written = int64(sz)
					text, _ := mem.Read(ptr, sz)
					keys := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
					if sz > 0 && (!sort.StringsAreSorted(keys) || len(keys) > abi.MaxListPage) {
						t.Fatalf("page %q", text)
					}
				}
			}
		case 3:
			stack[0], stack[1], stack[2], stack[3], stack[4] = uint64(uint32(start)), uint64(p1), uint64(uint32(n1)), uint64(ptr), uint64(uint32(n))
			fieldRead(ctx, inst.mod, stack)
			res = int64(stack[0])
			if res >= 0 {
				if _, sz, _ := abi.UnpackField(res); int64(sz) <= int64(n) {
					written = int64(sz)
				}
			}
		case 4:
			stack[0], stack[1], stack[2] = uint64(uint32(start)), uint64(ptr), uint64(uint32(n))
			objectRead(ctx, inst.mod, stack)
			res = int64(int32(stack[0]))
			if res >= 0 && res <= int64(n) {
				written = res
			}
		}
		if res < 0 && abi.ErrorName(int32(res)) == "" {
			t.Fatalf("fn %d: undocumented error %d", fn%5, res)
		}
		if fn%5 >= 3 && res >= 0 && start != abi.FirstHandle {
			t.Fatalf("fn %d: which %d (no such handle, no event) returned %d", fn%5, start, res)
		}
		after, _ := mem.Read(0, size)
		for i := range after {
			if after[i] != before[i] && (int64(i) < int64(ptr) || int64(i) >= int64(ptr)+written) {
				t.Fatalf("fn %d wrote byte %d outside [%d, %d)", fn%5, i, ptr, int64(ptr)+written)
			}
		}
	})
}
