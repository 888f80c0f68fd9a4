package filter

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
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

// parsePath parses the dotted syntax of Spec.Changed:
//
//	status.phase
//	metadata.labels["app.kubernetes.io/name"]   (or single quotes)
//	spec.containers[0].image
//
// A dotted segment is any run of characters other than . [ ] quotes and
// white space, which covers every Kubernetes field name; keys that contain
// those characters (label and annotation keys do) go in brackets. Inside
// double quotes Go escapes apply; single quotes take the text literally.
func parsePath(s string) (fieldPath, error) {
	p := fieldPath{text: s}
	if s == "" {
		return p, fmt.Errorf("empty field path")
	}
	i := 0
	// expectSegment is true where a dotted name must come next: at the
	// start and after a dot.
	expectSegment := true
	for i < len(s) {
		c := s[i]
		switch {
		case c == '[':
			if expectSegment && i != 0 {
				return p, fmt.Errorf("field path %q: '[' at offset %d follows a '.'; write a[\"b\"], not a.[\"b\"]", s, i)
			}
			step, n, err := parseBracket(s, i)
			if err != nil {
				return p, err
			}
			p.steps = append(p.steps, step)
			i += n
			expectSegment = false
			if i < len(s) && s[i] != '.' && s[i] != '[' {
				return p, fmt.Errorf("field path %q: unexpected %q at offset %d after ']'", s, s[i], i)
			}
		case c == '.':
			if expectSegment {
				return p, fmt.Errorf("field path %q: empty segment at offset %d", s, i)
			}
			expectSegment = true
			i++
			if i == len(s) {
				return p, fmt.Errorf("field path %q: ends with '.'", s)
			}
		default:
			if !expectSegment {
				return p, fmt.Errorf("field path %q: unexpected %q at offset %d; separate fields with '.'", s, c, i)
			}
			j := i
			for j < len(s) && isSegmentByte(s[j]) {
				j++
			}
			if j == i {
				return p, fmt.Errorf("field path %q: unexpected %q at offset %d; quote keys with special characters in brackets, e.g. labels[\"app.kubernetes.io/name\"]", s, c, i)
			}
			p.steps = append(p.steps, pathStep{key: s[i:j]})
			i = j
			expectSegment = false
		}
	}
	return p, nil
}

func isSegmentByte(c byte) bool {
	switch c {
	case '.', '[', ']', '"', '\'', ' ', '\t', '\n', '\r':
		return false
	}
	return true
}

// parseBracket parses `["key"]`, `['key']` or `[3]` at s[i] and returns
// the step and the number of bytes consumed.
func parseBracket(s string, i int) (pathStep, int, error) {
	end := strings.IndexByte(s[i:], ']')
	if i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\'') {
		q := s[i+1]
		// Find the closing quote, honouring backslash escapes in double
		// quotes so that `["a\"]b"]` works.
		j := i + 2
		for j < len(s) && s[j] != q {
			if q == '"' && s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return pathStep{}, 0, fmt.Errorf("field path %q: unterminated quote at offset %d", s, i+1)
		}
		if j+1 >= len(s) || s[j+1] != ']' {
			return pathStep{}, 0, fmt.Errorf("field path %q: expected ']' at offset %d", s, j+1)
		}
		key := s[i+2 : j]
		if q == '"' {
			var err error
			if key, err = strconv.Unquote(s[i+1 : j+1]); err != nil {
				return pathStep{}, 0, fmt.Errorf("field path %q: bad quoted key at offset %d: %v", s, i+1, err)
			}
		}
		return pathStep{key: key}, j + 2 - i, nil
	}
	if end < 0 {
		return pathStep{}, 0, fmt.Errorf("field path %q: unterminated '[' at offset %d", s, i)
	}
	inner := s[i+1 : i+end]
	n, err := strconv.Atoi(inner)
	if err != nil || n < 0 || strings.TrimSpace(inner) != inner || inner[0] == '+' {
		return pathStep{}, 0, fmt.Errorf("field path %q: bracket at offset %d holds %q; use a quoted key [\"...\"] or a list index [0]", s, i, inner)
	}
	return pathStep{index: n, isIndex: true}, end + 1, nil
}

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
