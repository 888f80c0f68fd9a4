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

func (f *fakeCaches) CacheGet(resource, namespace, name string) (*unstructured.Unstructured, bool) {
	u, ok := f.objs[namespace+"/"+name]
	return u, ok && resource == "cms"
}

// Ref resolves cms, and cms-too: a second configured resource of the
// same group/version/resource (another selector, say).
func (f *fakeCaches) Ref(name string) (*event.ResourceRef, bool) {
	return &event.ResourceRef{Name: name, Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}, name == "cms" || name == "cms-too"
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
	want := []string{"cache old@2", "cache src@1", "add old@2", "cache other@11", "add src@1", "cache copy@10", "cache-delete old", "add copy@10"}
	if got := recordedLines(t, r, "copier.wasm"); !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
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

// scriptedWrites answers each write with what do returns, do changing
// the fake informer's store as the watch would have by the time the
// call returns.
type scriptedWrites struct {
	do func(r *engine.WriteRequest) map[string]any
}

func (scriptedWrites) Check(*engine.WriteRequest) (int32, string) { return 0, "" }
func (w scriptedWrites) Do(_ context.Context, r *engine.WriteRequest) (map[string]any, int32, string) {
	return w.do(r), 0, ""
}

// recordedLines returns plugin's recorded lines as "type name" ("type
// name@rv" for a line with an object).
func recordedLines(t *testing.T, r *Recorder, plugin string) []string {
	t.Helper()
	var b strings.Builder
	if err := r.Write(plugin, &b); err != nil {
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
			u := &unstructured.Unstructured{Object: l.Object}
			name = u.GetName() + "@" + u.GetResourceVersion()
		}
		if l.Type == replay.LineSynced {
			name = l.Resource
		}
		got = append(got, l.Type+" "+name)
	}
	return got
}

// Whatever a call's writes did to a key the plugin may read, the change
// follows the call's event line: the write took the object out of the
// informer's selector, two writes to one key left the first's version in
// the store, a delete of an object with finalizers left it updated, or
// the write named another configured resource of the same
// group/version/resource. Each case: the plugin is told of a@1, then, in
// a call for a@1's update, writes; a synced call follows.
func TestRecordingHoldsBackEveryChangeOfTheCallsWrites(t *testing.T) {
	for _, c := range []struct {
		name   string
		writes []engine.WriteRequest
		// do is the apiserver's answer, changing the store (key demo/name)
		// as the informer would have.
		do   func(n int, objs map[string]*unstructured.Unstructured, r *engine.WriteRequest) map[string]any
		want []string
	}{{
		name:   "a label patch takes the object out of the selector",
		writes: []engine.WriteRequest{{Op: abi.WriteMergePatch, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("a")}},
		do: func(_ int, objs map[string]*unstructured.Unstructured, _ *engine.WriteRequest) map[string]any {
			delete(objs, "demo/a")
			return configMap("a", "5").Object
		},
		want: []string{"cache a@1", "add a@1", "update a@1", "cache-delete a", "synced cms"},
	}, {
		name: "a create then a status patch, the store at the create",
		writes: []engine.WriteRequest{
			{Op: abi.WriteCreate, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("copy"), Body: []byte(`{}`)},
			{Op: abi.WriteMergePatch, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("copy"), Subresource: []byte("status")},
		},
		do: func(n int, objs map[string]*unstructured.Unstructured, _ *engine.WriteRequest) map[string]any {
			if n == 0 {
				objs["demo/copy"] = configMap("copy", "10")
				return configMap("copy", "10").Object
			}
			return configMap("copy", "11").Object // its watch event not in yet
		},
		want: []string{"cache a@1", "add a@1", "update a@1", "cache copy@10", "synced cms"},
	}, {
		name:   "a delete of an object with finalizers",
		writes: []engine.WriteRequest{{Op: abi.WriteDelete, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte("a")}},
		do: func(_ int, objs map[string]*unstructured.Unstructured, _ *engine.WriteRequest) map[string]any {
			objs["demo/a"] = configMap("a", "7") // its deletionTimestamp set
			return nil
		},
		want: []string{"cache a@1", "add a@1", "update a@1", "cache a@7", "synced cms"},
	}, {
		name:   "a write naming another configured resource of configmaps",
		writes: []engine.WriteRequest{{Op: abi.WriteApply, Resource: []byte("cms-too"), Namespace: []byte("demo"), Name: []byte("copy"), Body: []byte(`{}`)}},
		do: func(_ int, objs map[string]*unstructured.Unstructured, _ *engine.WriteRequest) map[string]any {
			objs["demo/copy"] = configMap("copy", "10")
			return configMap("copy", "10").Object
		},
		want: []string{"cache a@1", "add a@1", "update a@1", "cache copy@10", "synced cms"},
	}, {
		name:   "a write naming the group/version/resource",
		writes: []engine.WriteRequest{{Op: abi.WriteApply, Resource: []byte("v1/configmaps"), Namespace: []byte("demo"), Name: []byte("copy"), Body: []byte(`{}`)}},
		do: func(_ int, objs map[string]*unstructured.Unstructured, _ *engine.WriteRequest) map[string]any {
			objs["demo/copy"] = configMap("copy", "10")
			return configMap("copy", "10").Object
		},
		want: []string{"cache a@1", "add a@1", "update a@1", "cache copy@10", "synced cms"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeCaches{objs: map[string]*unstructured.Unstructured{"demo/a": configMap("a", "1")}}
			r := &Recorder{p: f}
			r.stream("p.wasm").head.Cache = []string{"cms"}
			n := 0
			o := engine.InstanceOptions{Writes: scriptedWrites{func(w *engine.WriteRequest) map[string]any {
				defer func() { n++ }()
				return c.do(n, f.objs, w)
			}}}
			r.capabilities("p.wasm", &o)
			ref, _ := f.Ref("cms")
			r.handled("p.wasm", &event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("a", "1")}, 0, engine.Result{Code: engine.CodeOK}, nil)
			for _, w := range c.writes {
				if _, code, msg := o.Writes.Do(context.Background(), &w); code != 0 {
					t.Fatalf("write: %d %s", code, msg)
				}
			}
			r.handled("p.wasm", &event.Event{Type: event.EventUpdate, Resource: ref, Object: configMap("a", "1")}, 0, engine.Result{Code: engine.CodeOK}, nil)
			r.handled("p.wasm", &event.Event{Resource: ref}, 0, engine.Result{}, nil)
			if got := recordedLines(t, r, "p.wasm"); !slices.Equal(got, c.want) {
				t.Errorf("lines\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

// Writes no event line follows (ih_init's, a call cut by the stop or a
// fence) are cache for the next recorded event, as a filtered call's
// are: held back past it, the replay of it would not find them.
func TestRecordingUnrecordedCallsWritesPrecedeTheNextEvent(t *testing.T) {
	f := &fakeCaches{objs: map[string]*unstructured.Unstructured{"demo/src": configMap("src", "1")}}
	r := &Recorder{p: f}
	r.stream("p.wasm").head.Cache = []string{"cms"}
	o := engine.InstanceOptions{Writes: informerWrites{f}}
	r.capabilities("p.wasm", &o)
	ref, _ := f.Ref("cms")
	write := func(name string) {
		if _, code, msg := o.Writes.Do(context.Background(), &engine.WriteRequest{Op: abi.WriteApply, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte(name), Body: []byte(`{}`)}); code != 0 {
			t.Fatalf("write: %d %s", code, msg)
		}
	}
	write("from-init")
	r.unrecorded("p.wasm", true) // ih_init returned
	r.handled("p.wasm", &event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("src", "1")}, 0, engine.Result{Code: engine.CodeOK}, nil)
	write("from-cut-call")
	r.unrecorded("p.wasm", false) // the stop cut the call
	r.handled("p.wasm", &event.Event{Type: event.EventUpdate, Resource: ref, Object: configMap("src", "1")}, 0, engine.Result{Code: engine.CodeOK}, nil)
	want := []string{"cache from-init@10", "cache src@1", "add src@1", "cache from-cut-call@10", "update src@1"}
	if got := recordedLines(t, r, "p.wasm"); !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
}

// The stub file holds the calls the replay makes: ih_init's and those of
// recorded events; a call --resource leaves out, or one the stop cut,
// is in no events line, and its stubs would be unused. The stubs of a
// retried delivery's later attempts are marked retry: the replay retries
// on its own schedule, not the live run's.
func TestRecordingStubsAreTheReplayedCalls(t *testing.T) {
	f := &fakeCaches{objs: map[string]*unstructured.Unstructured{}}
	r := &Recorder{p: f, Resource: "cms"}
	var o engine.InstanceOptions
	o.Writes = informerWrites{f}
	r.capabilities("p.wasm", &o)
	write := func(name string) {
		if _, code, msg := o.Writes.Do(context.Background(), &engine.WriteRequest{Op: abi.WriteApply, Resource: []byte("cms"), Namespace: []byte("demo"), Name: []byte(name), Body: []byte(`{}`)}); code != 0 {
			t.Fatalf("write: %d %s", code, msg)
		}
	}
	cms, _ := f.Ref("cms")
	pods := &event.ResourceRef{Name: "pods", Version: "v1", Resource: "pods", Kind: "Pod"}
	pod := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "namespace": "demo", "resourceVersion": "3"}}}
	write("init")
	r.unrecorded("p.wasm", true)
	write("filtered")
	r.handled("p.wasm", &event.Event{Type: event.EventAdd, Resource: pods, Object: pod}, 0, engine.Result{Code: engine.CodeOK}, nil)
	for _, res := range []engine.Code{engine.CodeRetry, engine.CodeRetry, engine.CodeOK} {
		write("retried")
		r.handled("p.wasm", &event.Event{Type: event.EventAdd, Resource: cms, Object: configMap("a", "1")}, 0, engine.Result{Code: res}, nil)
	}
	write("cut")
	r.unrecorded("p.wasm", false)
	var got []string
	var b strings.Builder
	if err := r.WriteStubs("p.wasm", &b); err != nil {
		t.Fatal(err)
	}
	var file struct{ Stubs []replay.Stub }
	if err := json.Unmarshal([]byte(b.String()), &file); err != nil {
		t.Fatal(err)
	}
	for _, st := range file.Stubs {
		d := replay.Describe(st.Function, st.Request)
		if st.Retry {
			d += " (retry)"
		}
		got = append(got, d)
	}
	want := []string{"k8s_write apply cms demo/init", "k8s_write apply cms demo/retried",
		"k8s_write apply cms demo/retried (retry)", "k8s_write apply cms demo/retried (retry)"}
	if !slices.Equal(got, want) {
		t.Errorf("stubs\n%q\nwant\n%q\n%s", got, want, b.String())
	}
}
