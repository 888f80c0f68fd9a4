package filter

import (
	"reflect"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

func TestParsePath(t *testing.T) {
	k := func(s string) pathStep { return pathStep{key: s} }
	ix := func(i int) pathStep { return pathStep{index: i, isIndex: true} }
	good := []struct {
		in   string
		want []pathStep
	}{
		{"status", []pathStep{k("status")}},
		{"status.phase", []pathStep{k("status"), k("phase")}},
		{"metadata.labels.app", []pathStep{k("metadata"), k("labels"), k("app")}},
		{`metadata.labels["app.kubernetes.io/name"]`, []pathStep{k("metadata"), k("labels"), k("app.kubernetes.io/name")}},
		{`metadata.annotations["a\"b"].x`, []pathStep{k("metadata"), k("annotations"), k(`a"b`), k("x")}},
		{`metadata.annotations["a\\b"]`, []pathStep{k("metadata"), k("annotations"), k(`a\b`)}},
		{"spec.a b", []pathStep{k("spec"), k("a b")}}, // a space is a key byte, as in field_read
		{`data[""]`, []pathStep{k("data"), k("")}},
		{"spec.containers[0].image", []pathStep{k("spec"), k("containers"), ix(0), k("image")}},
		{"spec.matrix[1][2]", []pathStep{k("spec"), k("matrix"), ix(1), ix(2)}},
		{`["weird key"].x`, []pathStep{k("weird key"), k("x")}},
		{"spec.x-y_z$1", []pathStep{k("spec"), k("x-y_z$1")}},
	}
	for _, tt := range good {
		p, err := parsePath(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(p.steps, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.in, p.steps, tt.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "empty path at byte 0"},
		{".a", "empty key"},
		{"a..b", "empty key"},
		{"a.", "empty key"},
		{`a.["b"]`, "empty key"},
		{`a["b"`, "expected ']'"},
		{`a["b`, "unterminated quoted key"},
		{`a[b]`, "expected an index or a quoted key"},
		{`a[-1]`, "expected an index or a quoted key"},
		{`a[1`, "expected ']' after index"},
		{`a["b"]c`, "expected '.' or '['"},
		{`a]`, "expected '.' or '['"},
		{`a["\q"]`, "invalid escape"},
		{`metadata.labels['app']`, "single quotes are not path syntax"},
	}
	for _, tt := range bad {
		_, err := parsePath(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v, want one containing %q", tt.in, err, tt.msg)
		}
	}
}

func TestPathDiffers(t *testing.T) {
	old := map[string]any{
		"spec": map[string]any{
			"replicas":   int64(3),
			"containers": []any{map[string]any{"image": "a"}},
			"ratio":      0.5,
			"empty":      map[string]any{},
		},
		"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "x"}},
	}
	tests := []struct {
		path string
		new  map[string]any
		want bool
	}{
		{"spec.replicas", map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{"spec.replicas", map[string]any{"spec": map[string]any{"replicas": int64(4)}}, true},
		{"spec.replicas", map[string]any{"spec": map[string]any{"replicas": 3.0}}, true}, // int64 vs float64
		{"spec.replicas", map[string]any{"spec": map[string]any{}}, true},
		{"spec.replicas", map[string]any{}, true},
		{"spec.absent", map[string]any{}, false},
		{"spec.replicas.deeper", map[string]any{"spec": map[string]any{"replicas": map[string]any{}}}, false}, // absent on both sides
		{"spec.replicas.deeper", map[string]any{"spec": map[string]any{"replicas": map[string]any{"deeper": nil}}}, true},
		{"spec.containers[0].image", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a"}}}}, false},
		{"spec.containers[0].image", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "b"}}}}, true},
		{"spec.containers[1].image", map[string]any{"spec": map[string]any{"containers": []any{}}}, false},
		{"spec.containers", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a"}, nil}}}, true},
		{"spec.ratio", map[string]any{"spec": map[string]any{"ratio": 0.5}}, false},
		{"spec.empty", map[string]any{"spec": map[string]any{"empty": map[string]any{}}}, false},
		{`metadata.labels["app.kubernetes.io/name"]`, map[string]any{"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "x"}}}, false},
		{`metadata.labels["app.kubernetes.io/name"]`, map[string]any{"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "y"}}}, true},
	}
	for _, tt := range tests {
		p, err := parsePath(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.differs(old, tt.new); got != tt.want {
			t.Errorf("%s vs %v: differs=%v, want %v", tt.path, tt.new, got, tt.want)
		}
	}
}

func TestJSONEqual(t *testing.T) {
	type custom struct{ A int }
	tests := []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{nil, "", false},
		{"a", "a", true},
		{true, false, false},
		{int64(1), int64(1), true},
		{[]any{int64(1), "x"}, []any{int64(1), "x"}, true},
		{[]any{int64(1)}, []any{int64(1), int64(2)}, false},
		{map[string]any{"a": []any{}}, map[string]any{"a": []any{}}, true},
		{map[string]any{"a": nil}, map[string]any{"b": nil}, false},
		{map[string]any(nil), map[string]any{}, true},
		{[]any(nil), []any{}, true},
		{nil, map[string]any{}, false}, // null is not an empty object
		{custom{1}, custom{1}, true},   // falls back to reflect.DeepEqual
		{custom{1}, custom{2}, false},
	}
	for _, tt := range tests {
		if got := jsonEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("jsonEqual(%v, %v) = %v", tt.a, tt.b, got)
		}
	}
}

// A path in changed means what it means to a plugin's field_read, which
// scans with abi.PathScanner: both accept the same paths and refuse the
// same ones.
func TestChangedPathsUseTheABIGrammar(t *testing.T) {
	for _, path := range []string{
		`metadata.labels['app']`, `spec.a b`, `status.phase`, `metadata.labels["app.kubernetes.io/name"]`,
		`a[01]`, `a["x\y"]`, `a\b`, `a[1000000000]`, `[0]`, `["k"]`, `a.`, `tab	key`, `ünïcode.ключ`,
	} {
		_, abiErr := abi.ParsePath(path)
		_, err := Compile(Spec{Changed: []string{path}}, Options{})
		if (err == nil) != (abiErr == nil) {
			t.Errorf("changed: [%q]: filter says %v, field_read's scanner says %v", path, err, abiErr)
		}
	}
}
