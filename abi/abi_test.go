package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    Header
	}{
		{name: "empty", h: Header{Type: EventAdd}},
		{
			name: "pod",
			h: Header{Type: EventUpdate, Flags: FlagHasOldObject, Fields: [HeaderFieldCount]string{
				"pods", "", "v1", "pods", "Pod", "default", "web-0", "7d3c", "12345",
			}},
		},
		{
			name: "unicode and flags",
			h: Header{Type: EventDelete, Flags: FlagFinalStateUnknown | FlagInitialList, Fields: [HeaderFieldCount]string{
				"wids", "example.com", "v1alpha1", "widgets", "Widget", "", "ünï/cødé", "", "1",
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendHeader(nil, &tc.h)
			if len(b) != tc.h.Size() {
				t.Fatalf("encoded %d bytes, Size says %d", len(b), tc.h.Size())
			}
			v, err := ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Header(); got != tc.h {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.h)
			}
			// Appending after a prefix keeps the prefix.
			pre := []byte("xyz")
			b2 := AppendHeader(pre, &tc.h)
			if string(b2[:3]) != "xyz" || !bytes.Equal(b2[3:], b) {
				t.Fatal("AppendHeader with a prefix differs")
			}
		})
	}
}

// TestHeaderLayout pins the byte layout documented in ABI.md.
func TestHeaderLayout(t *testing.T) {
	h := Header{Type: EventUpdate, Flags: FlagHasOldObject, Fields: [HeaderFieldCount]string{"a", "", "", "", "", "", "bc", "", ""}}
	b := AppendHeader(nil, &h)
	want := []byte{1, 2, 4, 9}
	want = binary.LittleEndian.AppendUint32(want, 83)
	off := uint32(80)
	for i, f := range h.Fields {
		want = binary.LittleEndian.AppendUint32(want, off)
		want = binary.LittleEndian.AppendUint32(want, uint32(len(f)))
		off += uint32(len(f))
		_ = i
	}
	want = append(want, "abc"...)
	if !bytes.Equal(b, want) {
		t.Fatalf("layout:\n got %v\nwant %v", b, want)
	}
}

func TestHeaderForwardCompatible(t *testing.T) {
	// A later v1 host may append descriptors and bytes; a v1 reader must
	// accept them and still find the nine it knows.
	var b []byte
	b = append(b, Version, EventAdd, 0, 10)
	b = binary.LittleEndian.AppendUint32(b, 0) // patched below
	base := uint32(HeaderFixedSize + 8*10)
	for i := 0; i < 10; i++ {
		b = binary.LittleEndian.AppendUint32(b, base+uint32(i))
		b = binary.LittleEndian.AppendUint32(b, 1)
	}
	b = append(b, "abcdefghij"...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)))
	v, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(v.Field(FieldName)); got != "g" {
		t.Fatalf("name = %q", got)
	}
	if v.NumFields() != 10 || string(v.Field(9)) != "j" {
		t.Fatal("extra field lost")
	}
}

func TestParseHeaderErrors(t *testing.T) {
	good := AppendHeader(nil, &Header{Type: EventAdd, Fields: [HeaderFieldCount]string{"x"}})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:5], "need at least 8"},
		{"version", mut(func(b []byte) []byte { b[0] = 2; return b }), "ABI version 2"},
		{"few fields", mut(func(b []byte) []byte { b[3] = 8; return b }), "8 fields"},
		{"length", mut(func(b []byte) []byte { return b[:len(b)-1] }), "length field"},
		{"descriptor", mut(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 1000); return b }), "past the end"},
		{"overflow", mut(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[8:], 0xffffffff)
			binary.LittleEndian.PutUint32(b[12:], 0xffffffff)
			return b
		}), "past the end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.b)
			if err == nil || !errors.Is(err, ErrHeader) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(AppendHeader(nil, &Header{Type: EventAdd, Fields: [HeaderFieldCount]string{"pods", "", "v1"}}))
	f.Add([]byte{1, 1, 0, 9, 80, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseHeader(b)
		if err != nil {
			return
		}
		for i := -1; i <= v.NumFields(); i++ {
			_ = v.Field(i)
		}
		// Whatever parsed must re-encode to the same nine strings.
		h := v.Header()
		v2, err := ParseHeader(AppendHeader(nil, &h))
		if err != nil || v2.Header() != h {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

func TestParsePath(t *testing.T) {
	k := func(s string) Segment { return Segment{Key: s} }
	ix := func(i int) Segment { return Segment{Index: i, IsIndex: true} }
	tests := []struct {
		path string
		want []Segment
		err  string
	}{
		{path: "status.phase", want: []Segment{k("status"), k("phase")}},
		{path: "metadata.labels.app", want: []Segment{k("metadata"), k("labels"), k("app")}},
		{path: `metadata.labels["app.kubernetes.io/name"]`, want: []Segment{k("metadata"), k("labels"), k("app.kubernetes.io/name")}},
		{path: `spec.containers[0].image`, want: []Segment{k("spec"), k("containers"), ix(0), k("image")}},
		{path: `[12]`, want: []Segment{ix(12)}},
		{path: `["a\"b\\c"].d`, want: []Segment{k(`a"b\c`), k("d")}},
		{path: `a[""]`, want: []Segment{k("a"), k("")}},
		{path: `a/b-c_d:e`, want: []Segment{k("a/b-c_d:e")}},
		{path: "", err: "empty path"},
		{path: ".a", err: "empty key"},
		{path: "a.", err: "empty key"},
		{path: "a..b", err: "empty key"},
		{path: "a[", err: "unterminated"},
		{path: "a[01]", err: "leading zero"},
		{path: "a[1234567890]", err: "too large"},
		{path: "a[x]", err: "expected an index"},
		{path: `a["x"`, err: "expected ']'"},
		{path: `a["x`, err: "unterminated quoted"},
		{path: `a["\n"]`, err: "invalid escape"},
		{path: `a]`, err: "expected '.' or '['"},
		{path: `a"b`, err: "expected '.' or '['"},
		{path: `a.["b"]`, err: "empty key"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			got, err := ParsePath(tc.path)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrPath) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
		})
	}
}

func TestJoinPath(t *testing.T) {
	tests := []struct {
		keys []string
		want string
	}{
		{[]string{"status", "phase"}, "status.phase"},
		{[]string{"metadata", "labels", "app.kubernetes.io/name"}, `metadata.labels["app.kubernetes.io/name"]`},
		{[]string{`we"ird\`, "x"}, `["we\"ird\\"].x`},
		{[]string{"a", ""}, `a[""]`},
	}
	for _, tc := range tests {
		got := JoinPath(tc.keys...)
		if got != tc.want {
			t.Errorf("JoinPath(%q) = %s, want %s", tc.keys, got, tc.want)
		}
		segs, err := ParsePath(got)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range segs {
			if s.Key != tc.keys[i] {
				t.Errorf("round trip %d: %q != %q", i, s.Key, tc.keys[i])
			}
		}
	}
}

func FuzzPath(f *testing.F) {
	for _, p := range []string{"status.phase", `a["b.c"][3]`, `["\\"]`, "a[", ""} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		segs, err := ParsePath(p)
		if err != nil {
			return
		}
		// A path of keys only re-joins to a path that parses to the same keys.
		keys := make([]string, 0, len(segs))
		for _, s := range segs {
			if s.IsIndex {
				return
			}
			keys = append(keys, s.Key)
		}
		segs2, err := ParsePath(JoinPath(keys...))
		if err != nil || !reflect.DeepEqual(segs, segs2) {
			t.Fatalf("%q -> %q: %v", p, JoinPath(keys...), err)
		}
	})
}

func TestPackField(t *testing.T) {
	for _, k := range []int32{KindString, KindArray} {
		for _, s := range []uint32{0, 1, 1 << 31, 0xffffffff} {
			r := PackField(k, s)
			if r < 0 {
				t.Fatalf("packed %d,%d negative", k, s)
			}
			gk, gs, e := UnpackField(r)
			if gk != k || gs != s || e != 0 {
				t.Fatalf("unpack %d,%d = %d,%d,%d", k, s, gk, gs, e)
			}
		}
	}
	if _, _, e := UnpackField(int64(ErrNotFound)); e != ErrNotFound {
		t.Fatal("error code lost")
	}
}

func TestCapabilityOf(t *testing.T) {
	for name, want := range map[string]string{
		ImportCacheGet: CapabilityCache, ImportCacheList: CapabilityCache, ImportCacheIndex: CapabilityCache,
		"state_get": CapabilityState, "metric_add": CapabilityMetrics,
		"k8s_apply": CapabilityWrites, "event_record": CapabilityEvents, "http_call": CapabilityHTTP,
		ImportChildrenApply: CapabilityWrites, ImportStatusApply: CapabilityWrites, ImportReconcileRequeueAfter: "",
		ImportResultMessage: "", "k8s_": "", "http": "",
		ImportLog: "", ImportFieldRead: "", "cache_": "", "cache": "", "metrics_add": "", "": "",
	} {
		if got := CapabilityOf(name); got != want {
			t.Errorf("CapabilityOf(%q) = %q, want %q", name, got, want)
		}
	}
	// The capabilities this host implements functions of.
	implemented := map[string]bool{CapabilityCache: true, CapabilityState: true, CapabilityMetrics: true,
		CapabilityWrites: true, CapabilityEvents: true, CapabilityHTTP: true}
	for _, f := range Imports() {
		if c := CapabilityOf(f.Name); c != "" && !implemented[c] {
			t.Errorf("%s: capability %q has no functions in this host", f.Name, c)
		}
	}
}

func TestPackList(t *testing.T) {
	total, size, code := UnpackList(PackList(150, 4096))
	if total != 150 || size != 4096 || code != 0 {
		t.Fatalf("got %d %d %d", total, size, code)
	}
	if _, _, code := UnpackList(int64(ErrDenied)); code != ErrDenied {
		t.Fatal("error code lost")
	}
}

func TestSignatures(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range append(Imports(), Exports()...) {
		if seen[f.Name] {
			t.Fatalf("duplicate %s", f.Name)
		}
		seen[f.Name] = true
	}
	if got := Imports()[2].Signature.String(); got != "(i32, i32, i32, i32, i32) -> i64" {
		t.Fatal(got)
	}
	if got := Exports()[0].Signature.String(); got != "() -> ()" {
		t.Fatal(got)
	}
	for c := ErrFieldConflict; c <= ErrAbsent; c++ {
		if ErrorName(c) == "" {
			t.Fatalf("no name for %d", c)
		}
	}
}
