package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/shard"
)

// reportUpstream is the upstream of the report plugin: it folds every
// event header posted to it into the plugin's view (namespace/name →
// resourceVersion), as the soak's checker server does, and can hold the
// answer to one object's first report until the plugin's request gives
// up, after recording it: a request that landed, whose answer the
// plugin never read.
type reportUpstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	view    map[string]string
	reports []string // "type key rv flags", in arrival order
	hold    string   // the key whose next report is held
	held    chan struct{}
}

func newReportUpstream(t *testing.T) *reportUpstream {
	t.Helper()
	u := &reportUpstream{view: map[string]string{}, held: make(chan struct{}, 1)}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// header strings (ABI.md §8): namespace, name, resourceVersion.
const (
	hdrNamespace = 5
	hdrName      = 6
	hdrRV        = 8
)

func (u *reportUpstream) serve(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil || len(b) < 80 {
		http.Error(w, fmt.Sprintf("a header of %d bytes: %v", len(b), err), http.StatusBadRequest)
		return
	}
	str := func(i int) string {
		off, n := binary.LittleEndian.Uint32(b[8+8*i:]), binary.LittleEndian.Uint32(b[12+8*i:])
		if int(off+n) > len(b) {
			return ""
		}
		return string(b[off : off+n])
	}
	typ, flags := b[1], b[2]
	key, rv := str(hdrNamespace)+"/"+str(hdrName), str(hdrRV)
	u.mu.Lock()
	if typ == 3 {
		delete(u.view, key)
	} else {
		u.view[key] = rv
	}
	u.reports = append(u.reports, fmt.Sprintf("%d %s %s %#x", typ, key, rv, flags))
	hold := u.hold == key
	if hold {
		u.hold = ""
	}
	u.mu.Unlock()
	if hold {
		u.held <- struct{}{}
		<-r.Context().Done() // the plugin's request gave up: no answer
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// holdNext holds the answer to key's next report.
func (u *reportUpstream) holdNext(key string) {
	u.mu.Lock()
	u.hold = key
	u.mu.Unlock()
}

func (u *reportUpstream) snapshot() (map[string]string, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.view), slices.Clone(u.reports)
}

// A plugin handed an object's add in a call that its member's loss of
// the object fences may have acted on it already: its request reached
// the upstream, only the wait for the answer was canceled, and the
// plugin answered RETRY, as ABI.md §4.3 tells it to. The host must then
// hand it the handed-over delete that makes it let go, as for an object
// it took. It used to count the object as never handed (the answer was
// not OK) and pass it over in the replay that follows the move, so the
// plugin kept the object for good while the new owner's plugin had it
// too: the soak's object "in the views of [a b]", after a member's view
// went [a b] → [b] → [a b] while it was handing a new object's add. If
// the object comes back before that, the plugin, which asked for it
// again, gets it again as an add.
func TestShardingFencedAddIsHandedOverWhenItMayHaveLanded(t *testing.T) {
	for _, back := range []bool{false, true} {
		name := "the object moves away"
		if back {
			name = "the object moves away and comes back"
		}
		t.Run(name, func(t *testing.T) {
			up := newReportUpstream(t)
			cfg := strings.ReplaceAll(`
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: report=yes}
upstreams:
  - {name: u, url: "URL", methods: [POST], timeout: 5m}
plugins:
  directory: DIR
  modules:
    - file: report.wasm
      bindings: [{resource: cms}]
      grants:
        http: {upstreams: [u]}
`, "URL", up.srv.URL)
			now := time.Now()
			alone := shard.NewAssignment("a", []string{"a"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
			hs, err := newHarness(t, cfg, map[string][]byte{"report.wasm": testPlugin(t, "report")},
				func(hs *harness) { hs.assignment = alone })
			if err != nil {
				t.Fatal(err)
			}
			// b joins and wins the object.
			pair := shard.NewAssignment("a", []string{"a", "b"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
			x := ""
			for i := 0; x == ""; i++ {
				if n := fmt.Sprintf("x%d", i); pair.Owner(hs.ns, n) == "b" {
					x = n
				}
			}
			key := hs.ns + "/" + x
			up.holdNext(key)
			cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: x, Labels: map[string]string{"report": "yes"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-up.held: // the add's report landed; its answer waits
			case <-time.After(time.Minute):
				t.Fatal("the plugin's report of the add never reached the upstream")
			}
			hs.h.SetAssignment(pair)
			eventually(t, "the plugin to answer RETRY to its canceled report", func() bool {
				return slices.ContainsFunc(hs.rec.of("report.wasm"), func(d observed) bool {
					return d.Key == key && d.Failure == 0 && d.Code == engine.CodeRetry
				})
			})
			// What the member makes of the object says why (the soak
			// prints it for a doubled object): not its own, and its
			// plugin's only for the delete, until that delete is done.
			if v := hs.h.Object(context.Background(), "cms", hs.ns, x); !v.Sharded || v.Owner != "b" || v.Owned ||
				v.CacheRV != cm.ResourceVersion || len(v.Plugins) != 1 || !v.Plugins[0].Answered || v.Plugins[0].AppliedOwner != "b" ||
				v.Plugins[0].Has && (!v.Plugins[0].Unsettled || v.Plugins[0].RV != cm.ResourceVersion) {
				t.Errorf("the member's view of the object after the fence: %+v", v)
			}
			want := map[string]string{}
			if back {
				hs.h.SetAssignment(shard.NewAssignment("a", []string{"a"}, shard.KeyNamespaceName, true, time.Now(), time.Now().Add(time.Hour)))
				want[key] = cm.ResourceVersion
			}
			var view map[string]string
			var reports []string
			defer func() {
				if t.Failed() {
					t.Logf("the upstream's view %v after the reports:\n  %s", view, strings.Join(reports, "\n  "))
				}
			}()
			eventually(t, "the plugin's view to be the object's owner's", func() bool {
				view, reports = up.snapshot()
				return maps.Equal(view, want)
			})
			if !back && !slices.Contains(reports, fmt.Sprintf("3 %s %s %#x", key, cm.ResourceVersion, 0x10)) {
				t.Errorf("no handed-over delete of %s among the reports", key)
			}
			eventually(t, "the member's view of the object to settle", func() bool {
				v := hs.h.Object(context.Background(), "cms", hs.ns, x)
				return len(v.Plugins) == 1 && v.Plugins[0].Answered && v.Plugins[0].Has == back && !v.Plugins[0].Unsettled
			})
		})
	}
}

// A call fenced before it began (the member lost the object between the
// decision to hand it and the call) hands the plugin nothing, and its
// object goes back to the replay cursor, decided again under the
// Assignment then current. It used to be dropped: an initial-list entry
// never counted as handled, so the binding's ih_synced never came (and
// a change was lost if the object came back before the worker applied
// the Assignment that took it away).
func TestShardingCallFencedBeforeItBeganIsDecidedAgain(t *testing.T) {
	now := time.Now()
	alone := shard.NewAssignment("a", []string{"a"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
	pair := shard.NewAssignment("a", []string{"a", "b"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
	var x string
	var once sync.Once
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: fence=yes}
plugins:
  directory: DIR
  modules:
    - file: synced.wasm
      bindings: [{resource: cms}]
`, map[string][]byte{"synced.wasm": testPlugin(t, "synced")}, func(hs *harness) {
		for i := 0; x == ""; i++ {
			if n := fmt.Sprintf("x%d", i); pair.Owner(hs.ns, n) == "b" {
				x = n
			}
		}
		// In the initial list.
		if _, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: x, Labels: map[string]string{"fence": "yes"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hs.assignment = alone
		// b joins and wins the object after the worker decided to hand
		// it, before the call begins.
		hs.onDeliver = func(_ string, ev *event.Event, _ *shard.Assignment, _ time.Time) {
			if ev.Object != nil && ev.Object.GetName() == x {
				once.Do(func() { hs.h.SetAssignment(pair) })
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the binding's ih_synced", func() bool {
		return slices.ContainsFunc(hs.rec.of("synced.wasm"), func(d observed) bool { return d.Type == 0 && d.Resource == "cms" })
	})
	if calls := hs.rec.strings("synced.wasm"); slices.ContainsFunc(calls, func(c string) bool { return strings.Contains(c, x) }) {
		t.Errorf("the plugin was handed b's object: %q", calls)
	}
}
