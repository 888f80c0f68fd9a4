package controllerwrites

import (
	"context"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// An apply that would change nothing is not sent: the same child body
// as last applied, to an object the cache holds at the resourceVersion
// that apply answered with. Anything else applies: another body, the
// object changed by anyone (another resourceVersion), not cached (the
// cache behind, or the object deleted), the last apply failed, or the
// child was pruned since.
func TestApplyChildrenSkipsUnchanged(t *testing.T) {
	gr := widgets.GVR.GroupResource()
	mine := Owner{Resource: gr, Namespace: "ns", Name: "p", UID: "uid-p"}.String()
	rv := 0
	var fail bool
	f := &fakeWrites{}
	f.answer = func(*kubewrite.Request) (int32, string) {
		if fail {
			return abi.ErrForbidden, "forbidden"
		}
		return 0, ""
	}
	answered, last := "", ""
	do := &rvWrites{fakeWrites: f, next: func() string { rv++; answered = strconv.Itoa(rv); return answered }}
	var cache []*unstructured.Unstructured
	cacheAt := func(v string) {
		cache = nil
		if v != "" {
			c := cachedChild("ConfigMap", "ns", "c", "u1", "p.wasm", mine)
			c.SetResourceVersion(v)
			cache = []*unstructured.Unstructured{c}
		}
	}
	w := New(Options{Plugin: "p.wasm", Writes: do, Primary: widgets, Owns: []Resource{configmaps},
		Owned: listerFunc(func(string, string) []*unstructured.Unstructured { return cache })})
	apply := func(data string) int {
		t.Helper()
		before := len(f.requests(abi.WriteApply))
		if _, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, obj(primaryJSON),
			[]byte(`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"n":"`+data+`"}}]`)); err != nil {
			t.Fatal(err)
		}
		return len(f.requests(abi.WriteApply)) - before
	}
	steps := []struct {
		name  string
		setup func()
		data  string
		want  int
	}{
		{"first apply, nothing cached", func() {}, "1", 1},
		{"the cache behind the apply", func() { cacheAt("0") }, "1", 1},
		{"the cache at the answered version, same body: skipped", func() { cacheAt(answered) }, "1", 0},
		{"skipped again while nothing changed", func() {}, "1", 0},
		{"another body", func() {}, "2", 1},
		{"changed by someone else", func() { cacheAt(answered + "0") }, "2", 1},
		{"deleted by someone else", func() { cacheAt("") }, "2", 1},
		{"changed by someone else, and the apply fails", func() { last = answered; cacheAt(answered + "0"); fail = true }, "2", 1},
		{"a failed apply is forgotten: sent though the cache is back at the version last answered", func() { fail = false; cacheAt(last) }, "2", 1},
		{"body 3", func() {}, "3", 1},
	}
	for _, s := range steps {
		s.setup()
		if got := apply(s.data); got != s.want {
			t.Errorf("%s: %d applies sent, want %d", s.name, got, s.want)
		}
	}
	// Pruned: the child's memory goes with it, a later apply is sent.
	cacheAt(answered)
	if _, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, obj(primaryJSON), []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	if got := apply("3"); got != 1 {
		t.Errorf("after a prune: %d applies sent, want 1", got)
	}
}

// rvWrites answers every successful write with a new resourceVersion,
// as the apiserver does.
type rvWrites struct {
	*fakeWrites
	next func() string
}

func (r *rvWrites) Do(ctx context.Context, req *kubewrite.Request) (map[string]any, int32, string) {
	out, code, msg := r.fakeWrites.Do(ctx, req)
	if code == 0 {
		out = map[string]any{"metadata": map[string]any{"resourceVersion": r.next()}}
	}
	return out, code, msg
}
