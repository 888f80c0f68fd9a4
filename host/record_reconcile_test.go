package host

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/controllerwrites"
)

// scriptedChildren is a reconcile call's controller functions as the
// live host serves them, with the informer quick enough to hold the
// children's results before the call returns.
type scriptedChildren struct{ apply func() }

func (scriptedChildren) RequeueAfter(time.Duration) {}
func (c scriptedChildren) ApplyChildren(context.Context, []byte) (int32, int32, string) {
	c.apply()
	return 0, 0, ""
}
func (scriptedChildren) ApplyStatus(context.Context, []byte) (int32, string) { return 0, "" }

// A reconcile is recorded as one line with what it gave the host, and
// the cache lines before it are the cache the plugin read: the children
// the host applied and pruned in the call (which return no
// resourceVersions to know them by) stand there as the call found them,
// their results after its line. A change of anything else that lands
// during the call still comes before the line.
func TestRecordingReconcile(t *testing.T) {
	owned := func(name, rv string) *unstructured.Unstructured {
		u := configMap(name, rv)
		u.SetLabels(map[string]string{controllerwrites.LabelPlugin: controllerwrites.PluginLabel("ctl.wasm")})
		u.SetAnnotations(map[string]string{controllerwrites.AnnotationOwner: "configmaps/demo/p/u1"})
		return u
	}
	f := &fakeCaches{objs: map[string]*unstructured.Unstructured{"demo/kid": owned("kid", "1"), "demo/kid-old": owned("kid-old", "2")}}
	r := &Recorder{p: f}
	r.stream("ctl.wasm").head.Cache = []string{"cms"}
	primary := &event.ResourceRef{Name: "prims", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}
	p := configMap("p", "3")
	// The host applies kid again and kid-new, and prunes kid-old;
	// someone else adds other meanwhile.
	live := scriptedChildren{apply: func() {
		f.objs["demo/kid"], f.objs["demo/kid-new"] = owned("kid", "5"), owned("kid-new", "6")
		delete(f.objs, "demo/kid-old")
		f.objs["demo/other"] = configMap("other", "7")
	}}
	ctl, done := r.reconciling("ctl.wasm", primary, "demo", "p", p, 0, live)
	const children = `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kid"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kid-new"}}]`
	if failed, code, _ := ctl.ApplyChildren(context.Background(), []byte(children)); failed != 0 || code != 0 {
		t.Fatalf("children_apply: %d %d", failed, code)
	}
	ctl.RequeueAfter(time.Minute)
	done(engine.Result{Code: engine.CodeOK}, nil, false)
	// A second call, cut by the stop: no line, no stubs.
	ctl, done = r.reconciling("ctl.wasm", primary, "demo", "p", p, 0, live)
	_, _, _ = ctl.ApplyChildren(context.Background(), []byte(`[]`))
	done(engine.Result{}, context.Canceled, true)
	// The next reconcile, of an absent key.
	_, done = r.reconciling("ctl.wasm", primary, "demo", "gone", nil, 0, live)
	done(engine.Result{Code: engine.CodeOK}, nil, false)

	want := []string{"cache other@7", "cache kid@1", "cache kid-old@2", "reconcile p@3", "cache kid@5", "cache kid-new@6", "cache-delete kid-old", "reconcile gone"}
	if got := recordedLines(t, r, "ctl.wasm"); !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
	var b bytes.Buffer
	if err := r.Write("ctl.wasm", &b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	wantLine := `{"type":"reconcile","resource":"prims","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p","namespace":"demo","resourceVersion":"3"}},"namespace":"demo","name":"p","children":` +
		children + `,"requeueAfterMillis":60000,"result":"ok"}`
	if lines[4] != wantLine {
		t.Errorf("reconcile line\n%s\nwant\n%s", lines[4], wantLine)
	}
	if want := `{"type":"reconcile","resource":"prims","namespace":"demo","name":"gone","result":"ok"}`; lines[8] != want {
		t.Errorf("absent key's line\n%s\nwant\n%s", lines[8], want)
	}
	b.Reset()
	if err := r.WriteStubs("ctl.wasm", &b); err != nil {
		t.Fatal(err)
	}
	var stubs struct{ Stubs []map[string]any }
	if err := json.Unmarshal(b.Bytes(), &stubs); err != nil {
		t.Fatal(err)
	}
	if len(stubs.Stubs) != 1 || stubs.Stubs[0]["function"] != "children_apply" {
		t.Errorf("stubs: want the first call's children_apply only:\n%s", b.Bytes())
	}
}

// An object someone else changed just before the plugin wrote it in a
// call (a Pod its controller made, say) is, in the cache lines before the
// call's line, as the plugin found it, not left out because the store
// already holds the write's result: the replay reads what the plugin
// read, and writes it again as it did live.
func TestRecordingCacheHoldsWhatAWriteFound(t *testing.T) {
	f := &fakeCaches{objs: map[string]*unstructured.Unstructured{"demo/src": configMap("src", "1")}}
	r := &Recorder{p: f}
	r.stream("labeler.wasm").head.Cache = []string{"cms"}
	var o engine.InstanceOptions
	o.Writes = informerWrites{f}
	r.capabilities("labeler.wasm", &o)
	ref, _ := f.Ref("cms")
	r.handled("labeler.wasm", &event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("src", "1")}, 0, engine.Result{Code: engine.CodeOK}, nil)
	// late arrives after that line's cache lines; the next call reads
	// it and writes it.
	f.objs["demo/late"] = configMap("late", "5")
	if _, code, msg := o.Writes.Do(context.Background(), &engine.WriteRequest{Op: abi.WriteApply, Resource: []byte("cms"), Namespace: []byte("demo"),
		Name: []byte("late"), Body: []byte(`{}`)}); code != 0 {
		t.Fatalf("write: %d %s", code, msg)
	}
	r.handled("labeler.wasm", &event.Event{Type: event.EventAdd, Resource: ref, Object: configMap("late", "5")}, 0, engine.Result{Code: engine.CodeOK}, nil)
	r.handled("labeler.wasm", &event.Event{Type: event.EventUpdate, Resource: ref, Object: configMap("late", "10"), OldObject: configMap("late", "5")}, 0, engine.Result{Code: engine.CodeOK}, nil)
	want := []string{"cache src@1", "add src@1", "cache late@5", "add late@5", "cache late@10", "update late@10"}
	if got := recordedLines(t, r, "labeler.wasm"); !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
}

// A reconcile line's Secret children are written with their values
// blanked, as every Secret in a recording is, unless KeepSecretData.
func TestRecordingReconcileRedactsSecretChildren(t *testing.T) {
	for _, keep := range []bool{false, true} {
		r := &Recorder{p: &fakeCaches{}, KeepSecretData: keep}
		primary := &event.ResourceRef{Name: "prims", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}
		ctl, done := r.reconciling("ctl.wasm", primary, "demo", "p", configMap("p", "3"), 0, scriptedChildren{apply: func() {}})
		_, _, _ = ctl.ApplyChildren(context.Background(), []byte(`[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"password":"hunter2"}}]`))
		done(engine.Result{Code: engine.CodeOK}, nil, false)
		var b bytes.Buffer
		if err := r.Write("ctl.wasm", &b); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "hunter2"); got != keep {
			t.Errorf("KeepSecretData %v: the Secret child's value written: %v\n%s", keep, got, b.String())
		}
		if !strings.Contains(b.String(), `"stringData":{"password":`) {
			t.Errorf("KeepSecretData %v: the Secret child's keys are gone:\n%s", keep, b.String())
		}
	}
}
