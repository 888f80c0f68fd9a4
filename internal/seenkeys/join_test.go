package seenkeys

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A set split over ConfigMaps is believed only whole: parts of two
// writes (one cut short by a crash) or a missing part are refused, never
// read as a smaller set (whose missing keys' deletes would be missed) or
// as a mix of two (a gzip stream that does not decode).
func TestJoinRefusesPartsOfDifferentWrites(t *testing.T) {
	part := func(name, i, write string, data string) corev1.ConfigMap {
		return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{annPart: i, annWrite: write}}, BinaryData: map[string][]byte{dataKey: []byte(data)}}
	}
	tests := []struct {
		name  string
		parts []corev1.ConfigMap
		want  string // "" : joined to "ab"
	}{
		{"whole, out of order", []corev1.ConfigMap{part("x-1", "1/2", "w", "b"), part("x-0", "0/2", "w", "a")}, ""},
		{"two writes", []corev1.ConfigMap{part("x-0", "0/2", "w1", "a"), part("x-1", "1/2", "w2", "b")}, "another write"},
		{"a part missing", []corev1.ConfigMap{part("x-0", "0/2", "w", "a")}, "1 of 2 parts"},
		{"a part twice", []corev1.ConfigMap{part("x-0", "0/2", "w", "a"), part("y-0", "0/2", "w", "a")}, "part 1 missing"},
		{"no part annotation", []corev1.ConfigMap{part("x-0", "", "w", "a")}, "is not i/n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := join(tt.parts)
			if tt.want == "" {
				if err != nil || string(got) != "ab" {
					t.Fatalf("join = %q, %v; want \"ab\"", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("join = %q, %v; want an error with %q", got, err, tt.want)
			}
		})
	}
}
