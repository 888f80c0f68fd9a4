package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/shard"
)

// missedConfig is the report plugin (its upstream sees each header as
// the plugin read it, flags included) bound to labelled ConfigMaps, with
// a state file: the host's default place for the keys it handed.
const missedConfig = `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: report=yes}
upstreams:
  - {name: u, url: "URL", methods: [POST], timeout: 5m}
plugins:
  directory: DIR
  state: {path: DIR/state.db}
  modules:
    - file: report.wasm
      bindings: [{resource: cms}]
      grants:
        http: {upstreams: [u]}
      delivery: {missedDeletes: MODE}
`

func (hs *harness) createReported(name string) *corev1.ConfigMap {
	hs.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"report": "yes"}}}, metav1.CreateOptions{})
	if err != nil {
		hs.t.Fatal(err)
	}
	return cm
}

// stopHost stops the harness's host and pipeline, as a daemon's graceful
// stop does.
func (hs *harness) stopHost() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs.h.Stop(ctx)
	hs.p.Stop()
}

// reportsSince returns the upstream's reports after the first n.
func reportsSince(up *reportUpstream, n int) []string {
	_, r := up.snapshot()
	return slices.Clone(r[n:])
}

// A delete that happens while the daemon is down never reaches a
// listener: client-go's relist only knows what its new cache holds. The
// host remembers the keys it handed the plugin, so after a restart the
// plugin gets, once the informer has synced, exactly the deletes it
// missed, flagged missed-delete and final-state-unknown (0x22), with a
// stub of the object it had (its uid); an object deleted and recreated
// meanwhile gets the delete of the old uid before the add of the new
// one. With delivery.missedDeletes: skip, none.
func TestMissedDeletesAfterRestart(t *testing.T) {
	for _, mode := range []string{"deliver", "skip"} {
		t.Run(mode, func(t *testing.T) {
			up := newReportUpstream(t)
			cfg := strings.NewReplacer("URL", up.srv.URL, "MODE", mode).Replace(missedConfig)
			hs, err := newHarness(t, cfg, map[string][]byte{"report.wasm": testPlugin(t, "report")})
			if err != nil {
				t.Fatal(err)
			}
			old := map[string]string{}
			for _, n := range []string{"gone-1", "gone-2", "recreated", "kept"} {
				old[n] = string(hs.createReported(n).UID)
			}
			eventually(t, "the plugin to have the four objects", func() bool {
				v, _ := up.snapshot()
				return len(v) == 4
			})
			hs.stopHost()

			for _, n := range []string{"gone-1", "gone-2", "recreated"} {
				hs.deleteCM(n)
			}
			eventually(t, "recreated to be gone", func() bool {
				_, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(context.Background(), "recreated", metav1.GetOptions{})
				return err != nil
			})
			again := string(hs.createReported("recreated").UID)
			_, before := up.snapshot()
			observedBefore := len(hs.rec.of("report.wasm"))

			if err := hs.start(); err != nil {
				t.Fatal(err)
			}
			key := func(n string) string { return hs.ns + "/" + n }
			if mode == "skip" {
				eventually(t, "the restarted plugin's initial list", func() bool {
					return len(reportsSince(up, len(before))) == 2 && hs.status("report.wasm").Synced
				})
				for _, r := range reportsSince(up, len(before)) {
					if strings.HasPrefix(r, "3 ") {
						t.Errorf("missedDeletes: skip, yet the plugin got %q", r)
					}
				}
				return
			}
			eventually(t, "the plugin's view to match the cluster again", func() bool {
				v, _ := up.snapshot()
				_, hasKept := v[key("kept")]
				_, hasRecreated := v[key("recreated")]
				return len(v) == 2 && hasKept && hasRecreated && hs.status("report.wasm").Synced
			})
			got := reportsSince(up, len(before))
			var deletes []string
			for _, r := range got {
				if strings.HasPrefix(r, "3 ") {
					deletes = append(deletes, r)
				}
			}
			slices.Sort(deletes)
			want := []string{
				fmt.Sprintf("3 %s  0x22", key("gone-1")),
				fmt.Sprintf("3 %s  0x22", key("gone-2")),
				fmt.Sprintf("3 %s  0x22", key("recreated")),
			}
			if !slices.Equal(deletes, want) {
				t.Fatalf("deletes after the restart:\n%s\nwant exactly:\n%s\n(all reports: %q)", strings.Join(deletes, "\n"), strings.Join(want, "\n"), got)
			}
			// The recreated object: the old uid's delete, then the new add.
			iDel := slices.IndexFunc(got, func(r string) bool { return strings.HasPrefix(r, "3 "+key("recreated")) })
			iAdd := slices.IndexFunc(got, func(r string) bool { return strings.HasPrefix(r, "1 "+key("recreated")) })
			if iAdd < iDel {
				t.Errorf("recreated: the add of the new object came before the delete of the old one: %q", got)
			}
			// The stubs: the uids the plugin had, and nothing else of the
			// object.
			uids := hs.rec.uidsOf("report.wasm")
			for i, d := range hs.rec.of("report.wasm") {
				if i < observedBefore || d.Type != event.EventDelete {
					continue
				}
				name := strings.TrimPrefix(d.Key, hs.ns+"/")
				if uids[i] != old[name] || d.RV != "" || !d.Unknown {
					t.Errorf("missed delete of %s: uid %q rv %q finalStateUnknown %v; want the old uid %q, no resourceVersion, unknown", name, uids[i], d.RV, d.Unknown, old[name])
				}
				if uids[i] == again {
					t.Errorf("the recreated object's new uid was deleted")
				}
			}
			// Settled deletes are forgotten: a second restart hands none.
			_, before = up.snapshot()
			hs.stopHost()
			if err := hs.start(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the second restart's initial list", func() bool {
				return len(reportsSince(up, len(before))) == 2 && hs.status("report.wasm").Synced
			})
			for _, r := range reportsSince(up, len(before)) {
				if strings.HasPrefix(r, "3 ") {
					t.Errorf("a delete already settled was handed again after a second restart: %q", r)
				}
			}
		})
	}
}

// A plugin that is unloaded (its file removed) misses the deletes of
// that time too: when its file comes back, it gets them.
func TestMissedDeletesWhileUnloaded(t *testing.T) {
	up := newReportUpstream(t)
	cfg := strings.NewReplacer("URL", up.srv.URL, "MODE", "deliver").Replace(missedConfig)
	hs, err := newHarness(t, cfg, map[string][]byte{"report.wasm": testPlugin(t, "report")})
	if err != nil {
		t.Fatal(err)
	}
	hs.createReported("a")
	hs.createReported("b")
	eventually(t, "the plugin to have both objects", func() bool {
		v, _ := up.snapshot()
		return len(v) == 2
	})
	hs.h.Unload("report.wasm")
	hs.deleteCM("a")
	_, before := up.snapshot()
	if err := os.WriteFile(filepath.Join(hs.dir, "report.wasm"), testPlugin(t, "report"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "report.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the missed delete of a", func() bool {
		v, _ := up.snapshot()
		_, hasA := v[hs.ns+"/a"]
		return !hasA && len(v) == 1
	})
	var deletes []string
	for _, r := range reportsSince(up, len(before)) {
		if strings.HasPrefix(r, "3 ") {
			deletes = append(deletes, r)
		}
	}
	if want := []string{"3 " + hs.ns + "/a  0x22"}; !slices.Equal(deletes, want) {
		t.Fatalf("deletes after the reload: %q, want %q", deletes, want)
	}
}

// A member that gains a departed member's objects (here: the only member
// left, as after a crash) reads the departed member's set from its
// ConfigMaps and hands its plugin the deletes of those objects that
// happened while nobody watched them; objects that still exist arrive as
// adds, and the plugin's own keys are not affected.
func TestMissedDeletesOfADepartedMember(t *testing.T) {
	up := newReportUpstream(t)
	cfg := strings.NewReplacer("URL", up.srv.URL, "MODE", "deliver").Replace(missedConfig)
	ctx := context.Background()
	var ns string
	hs, err := newHarness(t, cfg, map[string][]byte{"report.wasm": testPlugin(t, "report")}, func(hs *harness) {
		ns = hs.ns
		// The departed member's set: one object gone since, one still there.
		kept, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "still-there", Labels: map[string]string{"report": "yes"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gone := seenkeys.New(seenkeys.Options{Backend: seenkeys.ConfigMaps(env.Client.CoreV1(), ns, "crashed")})
		set := gone.Set(ctx, "report.wasm")
		set.Add(seenkeys.Key{Resource: "cms", Namespace: ns, Name: "gone-while-unowned", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"})
		set.Add(seenkeys.Key{Resource: "cms", Namespace: ns, Name: "still-there", UID: string(kept.UID)})
		if err := gone.Close(ctx); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		hs.assignment = shard.NewAssignment("survivor", []string{"survivor"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
		hs.seenKeys = seenkeys.New(seenkeys.Options{Backend: seenkeys.ConfigMaps(env.Client.CoreV1(), ns, "survivor")})
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the departed member's gone object's delete", func() bool {
		_, r := up.snapshot()
		return slices.Contains(r, "3 "+ns+"/gone-while-unowned  0x22")
	})
	eventually(t, "the object that is still there", func() bool {
		v, _ := up.snapshot()
		_, ok := v[ns+"/still-there"]
		return ok && hs.status("report.wasm").Synced
	})
	_, r := up.snapshot()
	var deletes []string
	for _, x := range r {
		if strings.HasPrefix(x, "3 ") {
			deletes = append(deletes, x)
		}
	}
	if want := []string{"3 " + ns + "/gone-while-unowned  0x22"}; !slices.Equal(deletes, want) {
		t.Fatalf("deletes: %q, want exactly %q", deletes, want)
	}
}

// A quarantined plugin misses the deletes of its time off: when its file
// is replaced, the new version gets them, as stubs of what it had.
func TestMissedDeletesWhileQuarantined(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    limits: {maxConsecutiveFailures: 1}
`, map[string][]byte{"poison.wasm": testPlugin(t, "poison")})
	if err != nil {
		t.Fatal(err)
	}
	a := hs.createCM("a", nil)
	hs.createCM("b", nil)
	eventually(t, "the adds", func() bool { return len(hs.rec.of("poison.wasm")) == 2 })
	hs.createCM("poison", nil)
	eventually(t, "quarantine", func() bool { return hs.status("poison.wasm").State == StateQuarantined })
	hs.deleteCM("a")
	hs.deleteCM("poison")
	n := len(hs.rec.of("poison.wasm"))

	// A new version: the same code with a custom section ("v2") appended,
	// as a quarantined plugin stays off until its file changes.
	hs.write("poison.wasm", append(testPlugin(t, "poison"), 0x00, 0x04, 0x02, 'v', '2', 0x01))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "poison.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version synced and a's missed delete", func() bool {
		for _, d := range hs.rec.of("poison.wasm")[n:] {
			if d.Type == event.EventDelete {
				return hs.status("poison.wasm").Synced
			}
		}
		return false
	})
	var deletes []observed
	var uids []string
	all := hs.rec.uidsOf("poison.wasm")
	for i, d := range hs.rec.of("poison.wasm") {
		if i >= n && d.Type == event.EventDelete {
			deletes, uids = append(deletes, d), append(uids, all[i])
		}
	}
	if len(deletes) != 1 || deletes[0].Key != hs.ns+"/a" || uids[0] != string(a.UID) || deletes[0].RV != "" || !deletes[0].Unknown {
		t.Fatalf("deletes after the file was replaced: %+v (uids %q); want exactly a's, a stub with its uid %s", deletes, uids, a.UID)
	}
}
