package seenkeys

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestConfigMapsBackend writes sets through the real apiserver: a set
// larger than one ConfigMap holds is split and read back whole, another
// member reads it (a departed member's set), a shrunk set leaves no
// stale parts, and a forgotten one leaves no ConfigMap.
func TestConfigMapsBackend(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	cms := env.Client.CoreV1()
	a := &configMaps{c: cms, namespace: ns, member: "member-a", part: 4096}
	b := ConfigMaps(cms, ns, "member-b")

	var keys []Key
	for i := range 2000 {
		keys = append(keys, Key{"cms", "ns", fmt.Sprintf("obj-%d", i), uidN(i)})
	}
	st := New(Options{Backend: a})
	set := st.Set(ctx, "copy.wasm")
	for _, k := range keys {
		set.Add(k)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		l, err := cms.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, cm := range l.Items {
			if strings.HasPrefix(cm.Name, NamePrefix) {
				n++
			}
		}
		return n
	}
	parts := count()
	if parts < 2 {
		t.Fatalf("a set of %d keys gzip'd to more than 4096 bytes is in %d ConfigMap(s); want it split", len(keys), parts)
	}

	// A new store of the same member reads it back (a restart).
	st2 := New(Options{Backend: a})
	defer st2.Close(ctx)
	if got := st2.Set(ctx, "copy.wasm").Keys(""); len(got) != len(keys) {
		t.Fatalf("read back %d keys, want %d", len(got), len(keys))
	}
	// Another member reads it as a departed member's.
	stB := New(Options{Backend: b})
	defer stB.Close(ctx)
	others, err := stB.Others(ctx, "copy.wasm", []string{"member-b"})
	if err != nil || len(others) != len(keys) {
		t.Fatalf("member-b reads %d of member-a's keys (%v), want %d", len(others), err, len(keys))
	}
	if live, _ := stB.Others(ctx, "copy.wasm", []string{"member-a", "member-b"}); len(live) != 0 {
		t.Fatalf("member-b reads the set of member-a, which is live: %d keys", len(live))
	}
	if mine, _ := st.Others(ctx, "copy.wasm", nil); len(mine) != 0 {
		t.Fatalf("a member reads its own set as another's: %d keys", len(mine))
	}

	// Shrunk to one part: the others go.
	for _, k := range keys[10:] {
		set.Remove(k)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after shrinking to 10 keys, %d ConfigMaps remain", n)
	}
	st.Forget("copy.wasm")
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("a forgotten set left %d ConfigMaps", n)
	}
}
