package host

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/replay"
)

// redactSecrets blanks the values of whatever is a Secret, by the
// resource its line names or by its own apiVersion and kind, and leaves
// the informer's objects it was given as they were.
func TestRedactSecrets(t *testing.T) {
	secret := func() map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "s", "annotations": map[string]any{
				lastApplied: `{"apiVersion":"v1","kind":"Secret","stringData":{"k":"clear"}}`, "other": "kept"}},
			"data": map[string]any{"a": "c2VjcmV0"}, "stringData": map[string]any{"k": "clear"}}
	}
	redacted := map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "s", "annotations": map[string]any{
			lastApplied: `{"apiVersion":"v1","kind":"Secret","stringData":{"k":""}}`, "other": "kept"}},
		"data": map[string]any{"a": ""}, "stringData": map[string]any{"k": ""}}
	noKind := func() map[string]any {
		s := secret()
		delete(s, "apiVersion")
		delete(s, "kind")
		return s
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"a": "clear"}}
	for _, tc := range []struct {
		name     string
		res      replay.Resource
		obj, old map[string]any
		want     map[string]any // the object written; the old one the same
	}{
		{"by kind, any resource name", replay.Resource{}, secret(), secret(), redacted},
		{"by the secrets resource", replay.Resource{Version: "v1", Resource: "secrets"}, noKind(), nil,
			noKindOf(redacted)},
		{"a ConfigMap stays", replay.Resource{Version: "v1", Resource: "configmaps"}, cm, cm, cm},
		{"a secrets resource of another group stays", replay.Resource{Group: "example.com", Version: "v1", Resource: "secrets"},
			noKind(), nil, noKind()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal([]any{tc.obj, tc.old})
			l := redactSecrets(tc.res, replay.Line{Type: "update", Object: tc.obj, OldObject: tc.old})
			if !reflect.DeepEqual(l.Object, tc.want) {
				t.Errorf("object:\n%v\nwant\n%v", l.Object, tc.want)
			}
			if tc.old != nil && !reflect.DeepEqual(l.OldObject, tc.want) {
				t.Errorf("old object:\n%v\nwant\n%v", l.OldObject, tc.want)
			}
			if after, _ := json.Marshal([]any{tc.obj, tc.old}); string(after) != string(before) {
				t.Errorf("the informer's objects were changed:\n%s\nwere\n%s", after, before)
			}
		})
	}
}

func noKindOf(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k != "apiVersion" && k != "kind" {
			out[k] = v
		}
	}
	return out
}

// fakeCaches is the informer's stores as a recording reads them.
type fakeCaches struct {
	objs map[string]*unstructured.Unstructured // "namespace/name" of configmaps
}

func (f *fakeCaches) CacheList(resource, _ string, _ labels.Selector, fn func(*unstructured.Unstructured)) {
	if resource != "cms" {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(f.objs)) {
		fn(f.objs[k])
	}
}

func (f *fakeCaches) Ref(name string) (*event.ResourceRef, bool) {
	return &event.ResourceRef{Name: name, Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}, name == "cms"
}

func configMap(name, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "demo", "resourceVersion": rv}}}
}

// informerWrites is the plugin's writes as the live host makes them, with
// the informer quick enough to hold each write's result before the call
// returns (the watch event of a write usually arrives within
// milliseconds).
type informerWrites struct{ f *fakeCaches }

func (informerWrites) Check(*engine.WriteRequest) (int32, string) { return 0, "" }
func (w informerWrites) Do(_ context.Context, r *engine.WriteRequest) (map[string]any, int32, string) {
	key := string(r.Namespace) + "/" + string(r.Name)
	if r.Op == abi.WriteDelete {
		delete(w.f.objs, key)
		return nil, 0, ""
	}
	u := configMap(string(r.Name), "10")
	w.f.objs[key] = u
	return u.Object, 0, ""
}

// The cache lines before an event are the cache the plugin read when it
// was called, not one holding the results of its own writes in that call:
// a controller that copies a ConfigMap when the copy is absent must find
// it absent in the replay too, and write it again as it did live. A
// change made by anyone else that lands during the call still appears
// before the event (the recording cannot tell when it landed).
func TestRecordingCacheExcludesTheCallsOwnWrites(t *testing.T) {
	f := &fakeCaches{objs: map[string]*unstructured.Unstructured{"demo/src": configMap("src", "1"), "demo/old": configMap("old", "2")}}
	r := &Recorder{p: f}
	r.stream("copier.wasm").head.Cache = []string{"cms"}
	var o engine.InstanceOptions
	o.Writes = informerWrites{f}
	r.capabilities("copier.wasm", &o)
	ref, _ := f.Ref("cms")
	handle := func(ev *event.Event, calls func()) {
		calls()
		r.handled("copier.wasm", ev, 0, engine.Result{Code: engine.CodeOK}, nil)
	}
	handle(&event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("old", "2")}, func() {})
	// Then the plugin copies src and deletes old, and someone
	// else adds other meanwhile.
	handle(&event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("src", "1")}, func() {
		for _, w := range []engine.WriteRequest{
			{Op: abi.WriteApply, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("copy"), Body: []byte(`{}`)},
			{Op: abi.WriteDelete, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("old")},
		} {
			if _, code, msg := o.Writes.Do(context.Background(), &w); code != 0 {
				t.Fatalf("write: %d %s", code, msg)
			}
		}
		f.objs["demo/other"] = configMap("other", "11")
	})
	// The next event is the copy's own add, after which the cache holds it.
	handle(&event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("copy", "10")}, func() {})
	var b strings.Builder
	if err := r.Write("copier.wasm", &b); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		var l replay.Line
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		name := l.Name
		if l.Object != nil {
			name = (&unstructured.Unstructured{Object: l.Object}).GetName()
		}
		got = append(got, l.Type+" "+name)
	}
	want := []string{"cache old", "cache src", "add old", "cache other", "add src", "cache copy", "cache-delete old", "add copy"}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q\n%s", got, want, b.String())
	}
}

// A call whose event --resource leaves out still wrote before the next
// recorded event: its writes' results are cache lines before that event.
func TestRecordingCacheKeepsFilteredCallsWrites(t *testing.T) {
	f := &fakeCaches{objs: map[string]*unstructured.Unstructured{"demo/src": configMap("src", "1")}}
	r := &Recorder{p: f, Resource: "pods"}
	r.stream("copier.wasm").head.Cache = []string{"cms"}
	var o engine.InstanceOptions
	o.Writes = informerWrites{f}
	r.capabilities("copier.wasm", &o)
	cms, _ := f.Ref("cms")
	if _, code, msg := o.Writes.Do(context.Background(), &engine.WriteRequest{Op: abi.WriteApply, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("copy"), Body: []byte(`{}`)}); code != 0 {
		t.Fatalf("write: %d %s", code, msg)
	}
	r.handled("copier.wasm", &event.Event{Type: event.EventAdd, Resource: cms, Object: configMap("src", "1")}, 0, engine.Result{Code: engine.CodeOK}, nil)
	pods := &event.ResourceRef{Name: "pods", Version: "v1", Resource: "pods", Kind: "Pod"}
	pod := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "namespace": "demo", "resourceVersion": "3"}}}
	r.handled("copier.wasm", &event.Event{Type: event.EventAdd, Resource: pods, Object: pod}, 0, engine.Result{Code: engine.CodeOK}, nil)
	var b strings.Builder
	if err := r.Write("copier.wasm", &b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], `"name":"copy"`) || !strings.Contains(lines[3], `"type":"add"`) {
		t.Errorf("want the head, cache copy, cache src, add p:\n%s", b.String())
	}
}
