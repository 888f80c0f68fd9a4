package main

import (
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi/kit/kittest"
)

func TestCopiesByHand(t *testing.T) {
	h := kittest.New(t)
	if err := h.Init(); err != nil {
		t.Fatal(err)
	}
	h.GrantCache(src, dst)
	ok := func(r kittest.Result) {
		t.Helper()
		if r.Code != kittest.OK {
			t.Fatal(r)
		}
	}
	data := func(name string) string {
		o, _ := h.CacheObject(dst, "dst", name)
		return o
	}
	ok(h.Add(src, `{"metadata":{"namespace":"src","name":"a","labels":{"sync":"true"}},"data":{"k":"v1"}}`))
	if !strings.Contains(data("a"), `"k":"v1"`) || !strings.Contains(data("a"), `"copy.example.com/source":"src"`) {
		t.Fatalf("copy %s", data("a"))
	}
	// An edited copy is mapped back to its source by hand and restored.
	edited := `{"metadata":{"namespace":"dst","name":"a","labels":{"copy.example.com/source":"src"}},"data":{"k":"edited"}}`
	ok(h.Update(dst, data("a"), edited))
	if !strings.Contains(data("a"), `"k":"v1"`) {
		t.Fatalf("copy after an edit %s", data("a"))
	}
	// The source goes: the copy is deleted by hand.
	ok(h.Delete(src, `{"metadata":{"namespace":"src","name":"a"}}`))
	if _, there := h.CacheObject(dst, "dst", "a"); there {
		t.Fatal("the copy outlived its source")
	}
	// A source deleted while the daemon was down: only the sweep, once
	// both caches are synced, finds its copy.
	h.Cache(dst, `{"metadata":{"namespace":"dst","name":"gone","labels":{"copy.example.com/source":"src"}}}`)
	h.Synced(src)
	if _, there := h.CacheObject(dst, "dst", "gone"); !there {
		t.Fatal("swept before both caches were synced")
	}
	h.Synced(dst)
	if _, there := h.CacheObject(dst, "dst", "gone"); there {
		t.Fatal("the orphan was not swept")
	}
}
