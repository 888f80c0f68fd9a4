package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/host/replay"
	"github.com/informer-host/informer-host/internal/testenv"
)

// replay --compare holds the plugin's calls to the stub file, which a
// recording writes as the calls the live run made: a recorded call the
// replay did not make (an unused stub) or a call the recording did not
// make (no stub, or one more than the stubs for its request) fails it,
// unless --allow calls accepts it. Without --compare the replay still
// says so. The writer fixture merge-patches each event's object once.
func TestReplayCompareCalls(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	events := file("events.jsonl", `{"informerHostEvents":1,"resources":{"cms":{"version":"v1","resource":"configmaps","kind":"ConfigMap"}}}
{"type":"add","resource":"cms","object":{"metadata":{"name":"a","namespace":"demo"}},"result":"ok"}
`)
	twice := file("twice.jsonl", `{"informerHostEvents":1,"resources":{"cms":{"version":"v1","resource":"configmaps","kind":"ConfigMap"}}}
{"type":"add","resource":"cms","object":{"metadata":{"name":"a","namespace":"demo","resourceVersion":"1"}},"result":"ok"}
{"type":"update","resource":"cms","oldObject":{"metadata":{"name":"a","namespace":"demo","resourceVersion":"1"}},"object":{"metadata":{"name":"a","namespace":"demo","resourceVersion":"2"}},"result":"ok"}
`)
	plugin := filepath.Join(dir, "writer.wasm")
	if err := os.WriteFile(plugin, testenv.WAT(t, "../../host/testdata/fixtures/writer.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := file("config.json", `{"metadata":{"labels":{"copied":"yes"}}}`)
	const write = `{"function": "k8s_write", "request": {"op": "merge-patch", "resource": "cms", "namespace": "demo", "name": "a", "body": {"metadata":{"labels":{"copied":"yes"}}}}}`
	const other = `{"function": "k8s_write", "request": {"op": "apply", "resource": "cms", "namespace": "demo", "name": "copy"}}`
	stubs := func(s ...string) string {
		return file("stubs.json", `{"informerHostStubs": 1, "stubs": [`+strings.Join(s, ",")+`]}`)
	}
	for _, tc := range []struct {
		name  string
		stubs []string
		args  []string
		code  int
		out   []string
	}{
		{"as recorded", []string{write}, []string{"--compare"}, 0, []string{"PASS"}},
		{"a recorded write not made", []string{write, other}, []string{"--compare"}, 1,
			[]string{"unused stubs", `"name": "copy"`, "FAIL: stubs[1] (k8s_write apply cms demo/copy) was not used: the recording made this call, the replay did not (--allow calls to accept)"}},
		{"a recorded write not made, allowed", []string{write, other}, []string{"--compare", "--allow", "calls"}, 0,
			[]string{"unused stubs", "PASS"}},
		{"a recorded write not made, not compared", []string{write, other}, nil, 0, []string{"unused stubs", "PASS"}},
		{"a write made twice, recorded once", []string{write}, []string{"--compare", "--events", twice}, 1,
			[]string{"FAIL: step 2 (ih_handle, events line 3, update cms demo/a): k8s_write merge-patch cms demo/a: answered again by a stub this request used already: the recording made it fewer times (--allow calls to accept)"}},
		{"a write made twice, recorded twice", []string{write, write}, []string{"--compare", "--events", twice}, 0, []string{"PASS"}},
		{"a write not recorded", nil, []string{"--compare", "--allow", "error"}, 1,
			[]string{"FAIL: step 1 (ih_handle, events line 2, add cms demo/a): k8s_write merge-patch cms demo/a: no stub answers it: the recording made no such call (--allow calls to accept)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", "--plugin", plugin, "--events", events, "--stubs", stubs(tc.stubs...), "--cache-dir", "", "--config", config}, tc.args...)
			var out, errb bytes.Buffer
			code := Main(context.Background(), args, &out, &errb)
			for _, want := range tc.out {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if code != tc.code || t.Failed() {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errb.String())
			}
		})
	}
}

// A retried delivery's later attempts are made on the replay's schedule,
// not the live run's: --compare does not count their calls (a stub the
// recording marked retry left unused, a later attempt's call answered
// again), but still fails a first attempt's call the replay did not make.
func TestReplayCompareIgnoresRetryCounts(t *testing.T) {
	req := json.RawMessage(`{"op":"apply","resource":"cms","namespace":"demo","name":"a"}`)
	write := replay.Stub{Function: "k8s_write", Request: req}
	retried := write
	retried.Retry = true
	step := func(attempt int, extra string) replay.Step {
		return replay.Step{Seq: attempt, Call: "ih_handle", Line: 2, Event: "add cms demo/a", Attempt: attempt, Result: "retry", Recorded: "retry",
			Calls: []replay.Call{{Function: "k8s_write", Request: req, Stubbed: true, Extra: extra}}}
	}
	for _, tc := range []struct {
		name     string
		steps    []replay.Step
		unused   []replay.UnusedStub
		problems int
	}{
		{"fewer attempts than live", []replay.Step{step(1, "")}, []replay.UnusedStub{{Index: 1, Stub: retried}}, 0},
		{"more attempts than live", []replay.Step{step(1, ""), step(2, ""), step(3, replay.ExtraRepeated)}, nil, 0},
		{"a first attempt's call not made", nil, []replay.UnusedStub{{Index: 0, Stub: write}}, 1},
		{"a first attempt's call made twice", []replay.Step{step(1, replay.ExtraRepeated)}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := verdict(&replay.Report{Steps: tc.steps, UnusedStubs: tc.unused}, nil, true)
			if len(got) != tc.problems {
				t.Errorf("problems %q, want %d", got, tc.problems)
			}
		})
	}
}

// replay --compare holds a reconcile to what the recording's gave the
// host: the recorded controller fixture passes; changed to give another
// children set or another requeue-after, it fails, each named.
func TestReplayCompareReconcile(t *testing.T) {
	const dir = "../../host/replay/testdata"
	src, err := os.ReadFile(filepath.Join(dir, "controller.wat"))
	if err != nil {
		t.Fatal(err)
	}
	const copyChild = `{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"copy\",\"namespace\":\"dst\"}}]`
	for _, tc := range []struct {
		name     string
		old, new string
		code     int
		out      []string
	}{
		{name: "as recorded", code: 0, out: []string{"requeue-after 1m0s", "PASS"}},
		{name: "another requeue-after", old: "(i64.const 60000)", new: "(i64.const 120000)", code: 1,
			out: []string{"FAIL: step 1 (ih_reconcile, events line 4, reconcile cms src/a): requeue-after: recorded 1m0s, replayed 2m0s"}},
		{name: "another children set", old: copyChild, new: strings.TrimSuffix(copyChild, "]") + `,{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"extra\",\"namespace\":\"dst\"}}]`, code: 1,
			out: []string{"FAIL: step 1 (ih_reconcile, events line 4, reconcile cms src/a): children: recorded {ConfigMap dst/copy}, replayed {ConfigMap dst/copy, ConfigMap dst/extra}",
				"FAIL: step 1 (ih_reconcile, events line 4, reconcile cms src/a): result retry, recorded ok",
				"FAIL: step 1 (ih_reconcile, events line 4, reconcile cms src/a): children_apply cms src/a {ConfigMap dst/copy, ConfigMap dst/extra}: no stub answers it",
				"FAIL: stubs[0] (children_apply cms src/a {ConfigMap dst/copy}) was not used"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := string(src)
			if tc.old != "" {
				if !strings.Contains(text, tc.old) {
					t.Fatalf("controller.wat has no %q", tc.old)
				}
				text = strings.ReplaceAll(text, tc.old, tc.new)
			}
			plugin := filepath.Join(t.TempDir(), "controller.wasm")
			if err := os.WriteFile(plugin, testenv.WATText(t, text), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"replay", "--plugin", plugin, "--events", filepath.Join(dir, "controller.events.jsonl"),
				"--stubs", filepath.Join(dir, "controller.stubs.json"), "--cache-dir", "", "--compare"}, &out, &errb)
			for _, want := range tc.out {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if code != tc.code || t.Failed() {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errb.String())
			}
		})
	}
}
