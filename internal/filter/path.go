package filter

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// fieldPath is one parsed entry of Spec.Changed: a sequence of map keys
// and list indexes from the object root.
type fieldPath struct {
	text  string
	steps []pathStep
}

// pathStep is a map key, or a list index when isIndex is set.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

// parsePath parses an entry of Spec.Changed with the ABI's path scanner
// (abi/ABI.md section 9), so that a path means the same in changed as in
// a plugin's field_read:
//
//	status.phase
//	metadata.labels["app.kubernetes.io/name"]
//	spec.containers[0].image
//
// A bare key is any run of bytes other than . [ ] " and \; keys that
// contain those (label and annotation keys often do) go in brackets and
// double quotes, inside which only \" and \\ are escapes.
func parsePath(s string) (fieldPath, error) {
	p := fieldPath{text: s}
	segs, err := abi.ParsePath(s)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), abi.ErrPath.Error()+"\n")
		hint := ""
		if strings.Contains(s, "['") {
			hint = "; single quotes are not path syntax: write [\"...\"] (in YAML, single-quote the whole entry)"
		}
		return p, fmt.Errorf("invalid field path %q: %s%s; keys with . [ ] \" or \\ go in [\"...\"], e.g. labels[\"app.kubernetes.io/name\"]", s, msg, hint)
	}
	for _, sg := range segs {
		p.steps = append(p.steps, pathStep{key: sg.Key, index: sg.Index, isIndex: sg.IsIndex})
	}
	return p, nil
}

// FieldPath is a field path in the ABI's syntax, parsed once, for the
// host's other readers of object fields (a controller's watch field), so
// that a path means the same there as in changed and in field_read.
type FieldPath struct{ p fieldPath }

// ParseFieldPath parses s as parsePath does; its error says what is wrong
// and how keys with special characters are written.
func ParseFieldPath(s string) (*FieldPath, error) {
	p, err := parsePath(s)
	if err != nil {
		return nil, err
	}
	return &FieldPath{p: p}, nil
}

// Lookup returns the value at f in obj and whether it is present.
func (f *FieldPath) Lookup(obj map[string]any) (any, bool) { return f.p.lookup(obj) }

// String returns the path as written.
func (f *FieldPath) String() string { return f.p.text }

// lookup returns the value at p in obj and whether it is present.
func (p *fieldPath) lookup(obj map[string]any) (any, bool) {
	var cur any = obj
	for _, st := range p.steps {
		if st.isIndex {
			l, ok := cur.([]any)
			if !ok || st.index >= len(l) {
				return nil, false
			}
			cur = l[st.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[st.key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// differs reports whether p's value differs between old and new. Absent
// and present differ; absent on both sides does not.
func (p *fieldPath) differs(old, new map[string]any) bool {
	a, aok := p.lookup(old)
	b, bok := p.lookup(new)
	if aok != bok {
		return true
	}
	return aok && !jsonEqual(a, b)
}

// jsonEqual is deep equality for the values of an unstructured object
// (what encoding/json and the apiserver's decoder produce). It avoids
// reflect.DeepEqual, which is several times slower on these shapes, and
// falls back to it for anything else a transform may have put there.
// Unlike DeepEqual it counts a nil map or list (only a transform could
// put one there; decoding yields null or an empty one) as equal to an
// empty one. null stays distinct from {} and [].
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
