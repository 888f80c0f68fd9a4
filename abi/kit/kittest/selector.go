package kittest

import (
	"fmt"
	"slices"
	"strings"
)

// selector is a Kubernetes label selector, parsed with the standard
// library only so that the kit's module needs nothing else: the grammar
// of k8s.io/apimachinery/pkg/labels.Parse, comma-separated requirements of
// the forms k=v, k==v, k!=v, k in (a,b), k notin (a,b), k and !k. The
// host evaluates selectors with apimachinery itself; selector_test.go
// holds this one to apimachinery's answers, written out.
type selector []requirement

type requirement struct {
	key    string
	op     string // "=", "!=", "in", "notin", "exists", "!"
	values []string
}

func parseSelector(s string) (selector, error) {
	var out selector
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	for len(s) > 0 {
		var part string
		// A comma inside parentheses belongs to a set.
		depth, cut := 0, len(s)
		for i, c := range s {
			if c == '(' {
				depth++
			} else if c == ')' {
				depth--
			} else if c == ',' && depth == 0 {
				cut = i
				break
			}
		}
		part, s = strings.TrimSpace(s[:cut]), s[min(cut+1, len(s)):]
		if part == "" {
			return nil, fmt.Errorf("label selector: empty requirement")
		}
		r, err := parseRequirement(part)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		s = strings.TrimSpace(s)
	}
	return out, nil
}

func parseRequirement(p string) (requirement, error) {
	if k, ok := strings.CutPrefix(p, "!"); ok {
		k = strings.TrimSpace(k)
		return requirement{key: k, op: "!"}, checkKey(k)
	}
	for _, op := range []string{"!=", "==", "="} {
		if k, v, ok := strings.Cut(p, op); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if op == "==" {
				op = "="
			}
			if err := checkKey(k); err != nil {
				return requirement{}, err
			}
			if strings.ContainsAny(v, " =!(),") {
				return requirement{}, fmt.Errorf("label selector: invalid value %q", v)
			}
			return requirement{key: k, op: op, values: []string{v}}, nil
		}
	}
	if f := strings.Fields(p); len(f) >= 2 && (f[1] == "in" || f[1] == "notin") {
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p[len(f[0]):]), f[1]))
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return requirement{}, fmt.Errorf("label selector: %q: a set is written (a,b)", p)
		}
		var vals []string
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			vals = append(vals, strings.TrimSpace(v))
		}
		return requirement{key: f[0], op: f[1], values: vals}, checkKey(f[0])
	}
	return requirement{key: p, op: "exists"}, checkKey(p)
}

func checkKey(k string) error {
	if k == "" || strings.ContainsAny(k, " =!(),") {
		return fmt.Errorf("label selector: invalid key %q", k)
	}
	return nil
}

func (s selector) matches(l map[string]string) bool {
	for _, r := range s {
		v, ok := l[r.key]
		switch r.op {
		case "=":
			if !ok || v != r.values[0] {
				return false
			}
		case "!=":
			if ok && v == r.values[0] {
				return false
			}
		case "in":
			if !ok || !slices.Contains(r.values, v) {
				return false
			}
		case "notin":
			if ok && slices.Contains(r.values, v) {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!":
			if ok {
				return false
			}
		}
	}
	return true
}
