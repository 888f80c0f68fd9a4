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
