package kubewrite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
)

// Two tenant namespaces against the real apiserver: tenant A's two
// plugins share A's budget (burst 3, next token in 1000s), and when they
// have spent it A's next write is ERR_RATE_LIMITED at once, unsent,
// naming the namespace's bucket, though each plugin's own bucket is
// nearly full; tenant B's plugin still writes its whole burst: A's
// writes took nothing from B's budget. Counted in tokens and results,
// not time.
func TestWriterNamespaceBudget(t *testing.T) {
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	c, err := New(Options{Config: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	g := allVerbs("v1/configmaps")
	g.Timeout = config.NewDuration(time.Minute)
	plugin := func(name, ns string) *Writer {
		w, err := c.For(PluginOptions{Plugin: name, Grant: g, Namespace: ns, NamespaceQPS: 0.001, NamespaceBurst: 3})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a1, a2, b := plugin("a1.wasm", nsA), plugin("a2.wasm", nsA), plugin("b.wasm", nsB)
	write := func(w *Writer, ns, name string) (int32, string) {
		_, code, msg := do(t, w, Request{Op: abi.WriteApply, Resource: "v1/configmaps", Namespace: ns, Name: name, Body: cmBody(ns, name, "1")})
		return code, msg
	}
	for i, w := range []*Writer{a1, a2, a1} {
		if code, msg := write(w, nsA, fmt.Sprintf("a-%d", i)); code != 0 {
			t.Fatalf("tenant A write %d within its namespace's burst: %s %s", i, abi.ErrorName(code), msg)
		}
	}
	code, msg := write(a2, nsA, "a-over")
	if code != abi.ErrRateLimited {
		t.Fatalf("tenant A's write past its namespace's burst: %s %s, want ERR_RATE_LIMITED", abi.ErrorName(code), msg)
	}
	if want := "the write budget of namespace " + nsA + ", shared by its plugins (the tenancy ceiling's writesQPS 0.001, writesBurst 3)"; !strings.Contains(msg, want) {
		t.Errorf("refusal %q does not name the namespace's bucket (%s)", msg, want)
	}
	if left := a2.Budget().lim.Tokens(); left < 998 {
		t.Errorf("plugin a2's own bucket holds %.1f tokens, want ~999: the namespace's bucket, not its own, refused", left)
	}
	for i := range 3 {
		if code, msg := write(b, nsB, fmt.Sprintf("b-%d", i)); code != 0 {
			t.Fatalf("tenant B write %d: %s %s: tenant A's writes took from B's budget", i, abi.ErrorName(code), msg)
		}
	}
	if tA, tB := c.NamespaceBudget(nsA, 0.001, 3).Tokens(), c.NamespaceBudget(nsB, 0.001, 3).Tokens(); tA > 0.5 || tB > 0.5 {
		t.Errorf("namespace budgets hold A %.2f, B %.2f tokens, want both spent (~0)", tA, tB)
	}

	// Confined, a plugin writes nowhere else, its grant notwithstanding;
	// the host's own writes for it (Do without Check) neither.
	if code, msg := write(a1, nsB, "a-in-b"); code != abi.ErrDenied || !strings.Contains(msg, "confined to namespace") {
		t.Errorf("tenant A's write in B: %s %s, want ERR_DENIED", abi.ErrorName(code), msg)
	}
	if _, code, _ := a1.Do(context.Background(), &Request{Op: abi.WriteMergePatch, Resource: "v1/configmaps", Namespace: nsB, Name: "b-0", Body: []byte(`{}`)}); code != abi.ErrDenied {
		t.Errorf("tenant A's unchecked write in B: %s, want ERR_DENIED", abi.ErrorName(code))
	}
	if code, _ := a1.Check(&Request{Op: abi.WriteCreate, Resource: "v1/namespaces", Name: "x", Body: []byte(`{}`)}); code != abi.ErrDenied {
		t.Errorf("tenant A's cluster-scoped write: %s, want ERR_DENIED", abi.ErrorName(code))
	}
}
