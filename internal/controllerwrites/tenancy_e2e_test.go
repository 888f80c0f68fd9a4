package controllerwrites

import (
	"context"
	"errors"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// A tenant's controller (its writes confined to its namespace) answers
// a set with a child in another namespace: the whole set is refused
// ERR_DENIED before any write, so not even its own namespace's child is
// applied; the same set without the stray child goes through.
func TestE2EConfinedChildren(t *testing.T) {
	installCRD(t)
	ns, dst := env.Namespace(t), env.Namespace(t)
	p1 := createWidget(t, ns, "p1")
	c := startCache(t)
	w := newConfinedWriter(t, "team.ctl.wasm", e2eWidgets, "", c, nil, ns)

	_, err := w.ApplyChildren(context.Background(), Key{ns, "p1"}, p1, set(cm("", "a"), cm(dst, "x")))
	var e *Error
	if !errors.As(err, &e) || e.Code != abi.ErrDenied {
		t.Fatalf("a child in another namespace: %v, want ERR_DENIED", err)
	}
	for _, k := range [][2]string{{ns, "a"}, {dst, "x"}} {
		if _, ok := get(t, configmaps, k[0], k[1]); ok {
			t.Errorf("%s/%s was applied from a refused set", k[0], k[1])
		}
	}
	mustApply(t, w, Key{ns, "p1"}, p1, set(cm("", "a")))
	if _, ok := get(t, configmaps, ns, "a"); !ok {
		t.Error("the child in the plugin's own namespace was not applied")
	}
}
