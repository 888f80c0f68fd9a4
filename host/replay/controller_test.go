package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/testenv"
)

// testdata/controller.events.jsonl is a recording of the controller
// fixture (testdata/controller.wat) as the host records it: a reconcile
// of a live key, with what it gave the host, and one of an absent key;
// testdata/controller.stubs.json answers its controller calls as the
// live host did.

// controllerFixture is testdata/controller.wat with each old string
// replaced by its new one: a changed plugin.
func controllerFixture(t *testing.T, replace ...string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/controller.wat")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(src, replace[i]) {
			t.Fatalf("controller.wat has no %q to change", replace[i])
		}
		src = strings.ReplaceAll(src, replace[i], replace[i+1])
	}
	return testenv.WATText(t, src)
}

// A reconcile line replays as one ih_reconcile call with the recorded
// key, object and flags; its children_apply and status_apply are
// answered from the stubs, and what it gave the host is compared with the
// recording's: the same plugin replays identically, a changed one
// (another children set, requeue-after or status) is a mismatch that
// names what differs, and its calls part from the stubs.
func TestReplayReconcile(t *testing.T) {
	rec, err := ReadFile("testdata/controller.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	const stubsFile = "testdata/controller.stubs.json"
	const secondChild = `{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"copy\",\"namespace\":\"dst\"}},{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"extra\",\"namespace\":\"dst\"}}]`
	for _, tc := range []struct {
		name    string
		replace []string
		differs []string // substrings of the reconcile of src/a's Differs, in order
		calls   int      // calls apart from the stubs: unstubbed + unused
		result  string   // src/a's answer (default ok)
	}{
		{name: "the recorded plugin"},
		{name: "another children set", replace: []string{`{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"copy\",\"namespace\":\"dst\"}}]`, secondChild},
			// No stub answers the new set: ERR_UNAVAILABLE, and the
			// fixture answers RETRY before its status and requeue-after.
			differs: []string{"children: recorded {ConfigMap dst/copy}, replayed {ConfigMap dst/copy, ConfigMap dst/extra}",
				"replayed no status_apply call", "requeue-after: recorded 1m0s, replayed none"}, calls: 3, result: "retry"},
		{name: "another requeue-after", replace: []string{"(i64.const 60000)", "(i64.const 120000)"},
			differs: []string{"requeue-after: recorded 1m0s, replayed 2m0s"}},
		{name: "no requeue-after", replace: []string{"(i64.const 60000)", "(i64.const 0)"},
			differs: []string{"requeue-after: recorded 1m0s, replayed none"}},
		{name: "another status", replace: []string{`\"reason\":\"Copied\"`, `\"reason\":\"Stale\"`},
			differs: []string{`status: recorded {"conditions":[{"reason":"Copied","status":"True","type":"Ready"}]}, replayed {"conditions":[{"reason":"Stale"`,
				"requeue-after: recorded 1m0s, replayed none"}, calls: 2, result: "retry"},
		{name: "another child's body", replace: []string{`\"name\":\"copy\",\"namespace\":\"dst\"}`, `\"name\":\"copy\",\"namespace\":\"dst\",\"labels\":{\"x\":\"y\"}}`},
			differs: []string{`children: ConfigMap dst/copy: recorded {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"copy","namespace":"dst"}}, replayed {"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"x":"y"}`,
				"status: recorded {", "requeue-after"}, calls: 3, result: "retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stubs, err := ReadStubs(stubsFile)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), Options{Plugin: "controller.wasm", Wasm: controllerFixture(t, tc.replace...), Events: rec, Stubs: stubs})
			if err != nil {
				t.Fatal(err)
			}
			var steps []Step
			for _, s := range rep.Steps {
				if s.Call == "ih_reconcile" {
					steps = append(steps, s)
				}
			}
			if len(steps) != 2 || steps[0].Event != "reconcile cms src/a" || steps[1].Event != "reconcile cms src/b (absent)" {
				t.Fatalf("reconcile steps %+v", steps)
			}
			c := rep.Counts
			if want := cmp.Or(tc.result, "ok"); steps[0].Result != want || steps[0].Recorded != "ok" || steps[1].Result != "ok" || c.Events != 2 || c.Failures != 0 {
				t.Errorf("results %s, %s (want %s, ok); counts %+v", steps[0].Result, steps[1].Result, want, c)
			}
			got := strings.Join(steps[0].Differs, "\n")
			if len(steps[0].Differs) != len(tc.differs) {
				t.Errorf("differs:\n%s\nwant %d: %q", got, len(tc.differs), tc.differs)
			}
			for i, want := range tc.differs {
				if i >= len(steps[0].Differs) || !strings.Contains(steps[0].Differs[i], want) {
					t.Errorf("differs:\n%s\nwant %q", got, want)
				}
			}
			if want := min(len(tc.differs), 1); c.Mismatches != want || len(steps[1].Differs) != 0 {
				t.Errorf("mismatches %d, want %d; src/b differs %q", c.Mismatches, want, steps[1].Differs)
			}
			if n := c.UnstubbedCalls + c.UnusedStubs + c.RepeatedCalls; n != tc.calls {
				t.Errorf("calls apart from the stubs %d (%+v), want %d", n, c, tc.calls)
			}
			if tc.name == "the recorded plugin" {
				var fns []string
				for _, call := range steps[0].Calls {
					fns = append(fns, call.Function+" "+string(call.Request))
				}
				want := `children_apply {"body":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"copy","namespace":"dst"}}],"name":"a","namespace":"src","resource":"cms"}` + "\n" +
					`status_apply {"body":{"conditions":[{"reason":"Copied","status":"True","type":"Ready"}]},"name":"a","namespace":"src","resource":"cms"}` + "\n" +
					`reconcile_requeue_after {"millis":60000}`
				if strings.Join(fns, "\n") != want {
					t.Errorf("calls:\n%s\nwant\n%s", strings.Join(fns, "\n"), want)
				}
				if steps[0].RequeueAfterMillis != 60000 || string(steps[1].Children) != "[]" {
					t.Errorf("given: requeue %d, src/b's children %s", steps[0].RequeueAfterMillis, steps[1].Children)
				}
			}
		})
	}
}

// Without stubs each controller call is ERR_UNAVAILABLE, as a write is,
// and the replay prints the stub to add.
func TestReplayReconcileUnstubbed(t *testing.T) {
	rec, err := ReadFile("testdata/controller.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Plugin: "controller.wasm", Wasm: controllerFixture(t), Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts.Retries != 2 || rep.Counts.Mismatches != 2 || len(rep.MissingStubs) != 2 {
		t.Errorf("counts %+v, stubs to add %+v: want both reconciles answered RETRY (children_apply unavailable) and two stubs to add", rep.Counts, rep.MissingStubs)
	}
	if len(rep.MissingStubs) > 0 && (rep.MissingStubs[0].Function != "children_apply" || !strings.Contains(string(rep.MissingStubs[0].Request), `"name":"a"`)) {
		t.Errorf("stubs to add %+v", rep.MissingStubs)
	}
}

// The reader refuses reconcile lines that cannot be replayed, naming the
// line and what is wrong.
func TestReadReconcileRefuses(t *testing.T) {
	head := `{"informerHostEvents":1,"resources":{"cms":{"version":"v1","resource":"configmaps"}}}` + "\n"
	for _, tc := range []struct{ line, want string }{
		{`{"type":"reconcile","resource":"cms","namespace":"src"}`, "events.jsonl:2: a reconcile line needs the key's name"},
		{`{"type":"reconcile","resource":"cms","name":"a","deleting":true}`, "deleting needs the object"},
		{`{"type":"reconcile","resource":"cms","name":"a","children":{}}`, "children: want the JSON array"},
		{`{"type":"reconcile","resource":"cms","name":"a","status":[]}`, "status: want the JSON object"},
		{`{"type":"reconcile","resource":"cms","name":"a","requeueAfterMillis":-1}`, "requeueAfterMillis -1"},
		{`{"type":"add","resource":"cms","object":{},"children":[]}`, "belong to reconcile lines, not add"},
	} {
		_, err := Read("events.jsonl", strings.NewReader(head+tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.line, err, tc.want)
		}
	}
}

// A recording blanks the values of a reconcile's Secret children, as it
// blanks every Secret it holds; the replayed children are compared with
// theirs blanked alike, so only a change of anything else differs.
func TestChildrenDifferSecrets(t *testing.T) {
	secret := func(v string) string {
		return `[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","labels":{"l":"` + v + `"}},"data":{"k":"` + v + `"}}]`
	}
	recorded := RedactChildren(json.RawMessage(secret("dmFsdWU=")))
	if want := `[{"apiVersion":"v1","data":{"k":""},"kind":"Secret","metadata":{"labels":{"l":"dmFsdWU="},"name":"s"}}]`; string(recorded) != want {
		t.Fatalf("redacted %s, want %s", recorded, want)
	}
	if d := childrenDiffer(recorded, []byte(secret("dmFsdWU="))); d != "" {
		t.Errorf("the same Secret child differs: %s", d)
	}
	if d := childrenDiffer(recorded, []byte(`[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","labels":{"l":"other"}},"data":{"k":"dmFsdWU="}}]`)); !strings.Contains(d, "Secret s: recorded") {
		t.Errorf("a Secret child with another label: %q", d)
	}
	// Kept whole (--keep-secret-data): compared whole.
	if d := childrenDiffer([]byte(secret("a")), []byte(secret("b"))); d == "" {
		t.Errorf("a Secret kept whole compared equal to another value")
	}
}

// A delete the host inferred after the fact (a missed delete) is recorded
// with its flag, and replayed with it and final state unknown, as the
// live plugin was given them; the flag belongs to delete lines only.
func TestMissedDeleteLine(t *testing.T) {
	ref := &event.ResourceRef{Name: "cms", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}
	stub := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "demo", "name": "gone", "uid": "u1"}}}
	l := EventLine(&event.Event{Type: event.EventDelete, Resource: ref, Object: stub}, abi.FlagMissedDelete|abi.FlagFinalStateUnknown, "ok")
	if !l.MissedDelete || !l.FinalStateUnknown {
		t.Fatalf("line %+v: want missedDelete and finalStateUnknown", l)
	}
	var b strings.Builder
	w := NewWriter(&b)
	if err := w.Head(Head{Resources: map[string]Resource{"cms": ResourceOf(ref)}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Line(l); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rec, err := Read("events.jsonl", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got := &rec.Lines[0]
	if want := abi.FlagMissedDelete | abi.FlagFinalStateUnknown; got.PluginFlags()&want != want || !rec.Event(got).FinalStateUnknown {
		t.Errorf("replayed flags %#x, event %+v: want missed delete and final state unknown", got.PluginFlags(), rec.Event(got))
	}
	if l := EventLine(&event.Event{Type: event.EventDelete, Resource: ref, Object: stub}, abi.FlagSelfWrite, "ok"); l.MissedDelete || l.FinalStateUnknown {
		t.Errorf("a live delete recorded as missed: %+v", l)
	}
	head := `{"informerHostEvents":1,"resources":{"cms":{"version":"v1","resource":"configmaps"}}}` + "\n"
	if _, err := Read("events.jsonl", strings.NewReader(head+`{"type":"add","resource":"cms","object":{},"missedDelete":true}`)); err == nil ||
		!strings.Contains(err.Error(), "missedDelete belongs to delete lines, not add") {
		t.Errorf("missedDelete on an add: %v", err)
	}
}
