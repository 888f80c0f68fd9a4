package filter

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// loadPod returns a fresh copy of testdata/pod.json, decoded the way the
// apiserver's objects are (integers as int64).
func loadPod(tb testing.TB) *unstructured.Unstructured {
	tb.Helper()
	data, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		tb.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		tb.Fatal(err)
	}
	return u
}

func mustCompile(tb testing.TB, spec Spec, opts Options) *Filter {
	tb.Helper()
	f, err := Compile(spec, opts)
	if err != nil {
		tb.Fatalf("Compile(%+v): %v", spec, err)
	}
	return f
}
