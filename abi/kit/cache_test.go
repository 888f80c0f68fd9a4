package kit

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// cacheHost adds the cache imports to fakeHost: keys pages the way the
// host does (sorted keys from start, at most pageSize per call, the size
// protocol), so the kit's paging is tested across pages and buffer growth.
type cacheHost struct {
	*fakeHost
	keys     []string
	pageSize int
	calls    int
}

func (h *cacheHost) cacheGet(res, ns, name string) int32 {
	if res != "pods" {
		return abi.ErrDenied
	}
	return abi.ErrAbsent
}

func (h *cacheHost) page(res string, start int32, buf []byte) int64 {
	h.calls++
	if res != "pods" {
		return int64(abi.ErrDenied)
	}
	page := h.keys[min(int(start), len(h.keys)):]
	page = page[:min(len(page), h.pageSize)]
	var text []byte
	for _, k := range page {
		text = append(append(text, k...), '\n')
	}
	if len(text) <= len(buf) {
		copy(buf, text)
	}
	return abi.PackList(uint32(len(h.keys)), uint32(len(text)))
}

func (h *cacheHost) cacheList(res, ns, sel string, start int32, buf []byte) int64 {
	return h.page(res, start, buf)
}

func (h *cacheHost) cacheIndex(res, index, value string, start int32, buf []byte) int64 {
	return h.page(res, start, buf)
}

func TestCachePaging(t *testing.T) {
	var keys []string
	for i := range 2500 {
		// Long keys: the first page (1000 keys) does not fit in 4 KiB.
		keys = append(keys, fmt.Sprintf("namespace-with-a-long-name/pod-%05d", i))
	}
	h := &cacheHost{fakeHost: &fakeHost{}, keys: keys, pageSize: abi.MaxListPage}
	c := CacheReader{p: &plugin{host: h}}
	got, err := c.List("pods", "", "")
	if err != nil || !slices.Equal(got, keys) {
		t.Fatalf("List: %d keys, err %v; want all %d in order", len(got), err, len(keys))
	}
	if h.calls != 4 { // a too-small first call, then three pages
		t.Errorf("%d host calls, want 4", h.calls)
	}
	if _, err := c.Owned("secrets", "u"); !errors.Is(err, ErrDenied) {
		t.Errorf("Owned on an ungranted resource: %v, want ErrDenied", err)
	}
	if _, err := c.Get("pods", "ns", "x"); !errors.Is(err, ErrNoObject) {
		t.Errorf("Get of a missing object: %v, want ErrNoObject", err)
	}
	if ns, name := SplitKey("ns/a"); ns != "ns" || name != "a" {
		t.Errorf("SplitKey: %q %q", ns, name)
	}
	// Without the cache imports (another platform), everything is denied.
	if _, err := (CacheReader{p: &plugin{host: &fakeHost{}}}).List("pods", "", ""); !errors.Is(err, ErrDenied) {
		t.Errorf("no cache imports: %v, want ErrDenied", err)
	}
}
