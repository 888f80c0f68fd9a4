package nearest

import (
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	resources := []string{"pods", "pod", "po", "configmaps", "configmap", "cm", "deployments", "jobs", "pv", "secrets"}
	tests := []struct {
		name  string
		known []string
		want  []string
	}{
		{"pod", resources, []string{"pod", "pods"}},                    // case or plural slip
		{"Pods", resources, []string{"pods", "pod"}},                   // case does not count
		{"confgimaps", resources, []string{"configmaps", "configmap"}}, // a transposition
		{"deploy", resources, []string{"deployments"}},                 // a prefix
		{"job", resources, []string{"jobs"}},                           // not "pod": too far for three letters
		{"xyzzy", resources, nil},
		{"pod-loger.wasm", []string{"pod-logger.wasm", "pod-logger.wasm", "cm-audit.wasm"}, []string{"pod-logger.wasm"}},
		{"a", []string{"ab", "b"}, []string{"ab", "b"}}, // one edit is always near
	}
	for _, tc := range tests {
		if got := Names(tc.name, tc.known, 2); !slices.Equal(got, tc.want) {
			t.Errorf("Names(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"confgimaps", "configmaps", 2}, {"pods", "pods", 0}} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
