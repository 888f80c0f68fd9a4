package informer_test

import (
	"slices"
	"testing"

	"github.com/informer-host/informer-host/informer"
)

// TestCacheStampMovesWithEveryChange: the stamp stays while the caches do
// and moves once the cache shows an add, an update (of the data alone:
// the keys stay, the objects do not) and a delete, so an answer kept with
// a stamp is never served after the cache changed.
func TestCacheStampMovesWithEveryChange(t *testing.T) {
	ns := env.Namespace(t)
	p := startPipeline(t, env.Config, nil, configMaps("cms", ns))
	listen(t, p, "cms")
	stamp := func() informer.CacheStamp {
		t.Helper()
		s, ok := p.CacheStamp("cms")
		if !ok {
			t.Fatal("resource not active")
		}
		return s
	}
	keys := func() []string {
		k, err := p.CacheKeys(nil, "cms", informer.NamespaceIndex, ns)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	s0 := stamp()
	if s := stamp(); s != s0 {
		t.Fatal("the stamp moved with no change")
	}
	cm := mustCreate(t, configMap(ns, "a", "1", nil))
	eventually(t, "the add in the cache", func() bool { return slices.Equal(keys(), []string{ns + "/a"}) })
	s1 := stamp()
	if s1 == s0 {
		t.Fatal("the stamp did not move with an add")
	}
	mustUpdate(t, cm, "2")
	eventually(t, "the update in the cache", func() bool {
		u, ok := p.CacheGet("cms", ns, "a")
		return ok && u.Object["data"].(map[string]any)["v"] == "2"
	})
	s2 := stamp()
	if s2 == s1 {
		t.Fatal("the stamp did not move with an update")
	}
	mustDelete(t, ns, "a")
	eventually(t, "the delete in the cache", func() bool { return len(keys()) == 0 })
	if s := stamp(); s == s2 {
		t.Fatal("the stamp did not move with a delete")
	}
	if _, ok := p.CacheStamp("nope"); ok {
		t.Fatal("a stamp for a resource not configured")
	}
}
