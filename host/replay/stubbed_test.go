package replay

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// Capabilities II in a replay: every k8s_write, http_request and
// event_record call of a real example plugin is recorded into the output
// and answered from the stubs, or, unanswered, ERR_UNAVAILABLE with the
// stub to add.
func TestCapabilitiesIIStubbed(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the built example plugins, minutes of it, which -short leaves out")
	}
	const pods = `{"informerHostEvents":1,"resources":{"pods":{"version":"v1","resource":"pods","kind":"Pod"}}}
`
	// label-enforcer applies the label to a Pod that lacks it.
	const unlabelled = pods + `{"type":"add","resource":"pods","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"shop","resourceVersion":"7"}}}
`
	wantApply := `{"body":{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"team":"unowned"},"name":"web-1","namespace":"shop"}},"name":"web-1","namespace":"shop","op":"apply","resource":"pods","resourceVersion":"7"}`
	// crashloop-notifier posts a message when a container starts
	// crash-looping.
	const crashing = pods + `{"type":"update","resource":"pods",` +
		`"oldObject":{"metadata":{"name":"web-0","namespace":"shop"},"status":{"containerStatuses":[{"name":"app","restartCount":2,"state":{"running":{}}}]}},` +
		`"object":{"metadata":{"name":"web-0","namespace":"shop"},"status":{"containerStatuses":[{"name":"app","restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}}
`
	wantPost := `{"body":{"container":"app","namespace":"shop","pod":"web-0","reason":"CrashLoopBackOff","restartCount":3},"header":{"Content-Type":["application/json"]},"method":"POST","path":"/crashloop","upstream":"webhook"}`
	// event-recorder records a Warning about a ConfigMap over maxBytes.
	const big = `{"informerHostEvents":1,"resources":{"configmaps":{"version":"v1","resource":"configmaps","kind":"ConfigMap"}}}
{"type":"add","resource":"configmaps","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"shop"},"data":{"k":"0123456789"}}}
`
	wantEvent := `{"message":"data is 10 bytes, over the limit of 4","object":{"apiVersion":"v1","kind":"ConfigMap","name":"big","namespace":"shop"},"reason":"ConfigMapTooLarge","type":"Warning"}`
	for _, tc := range []struct {
		name, plugin, events string
		config               string
		stubs                []Stub
		result               string // of the ih_handle step
		call                 Call   // the one capabilities II call (Request compared as canonical JSON)
		logSub               string // in a log line of the step
	}{
		{name: "apply answered", plugin: "label-enforcer", events: unlabelled,
			stubs:  []Stub{{Function: "k8s_write", Request: json.RawMessage(wantApply), Response: json.RawMessage(`{"metadata":{"name":"web-1"}}`)}},
			result: "ok", call: Call{Function: "k8s_write", Request: json.RawMessage(wantApply), Response: json.RawMessage(`{"metadata":{"name":"web-1"}}`), Stubbed: true},
			logSub: "labelled shop/web-1"},
		{name: "apply answered without an object", plugin: "label-enforcer", events: unlabelled,
			stubs:  []Stub{{Function: "k8s_write"}},
			result: "ok", call: Call{Function: "k8s_write", Request: json.RawMessage(wantApply), Stubbed: true}, logSub: "labelled shop/web-1"},
		{name: "apply conflict", plugin: "label-enforcer", events: unlabelled,
			stubs:  []Stub{{Function: "k8s_write", Code: -9, Message: "the object has been modified"}},
			result: "ok", call: Call{Function: "k8s_write", Request: json.RawMessage(wantApply), Code: -9, Message: "the object has been modified", Stubbed: true},
			logSub: "stale shop/web-1"},
		{name: "apply unanswered", plugin: "label-enforcer", events: unlabelled,
			result: "retry-exhausted", call: Call{Function: "k8s_write", Request: json.RawMessage(wantApply), Code: -16,
				Message: unanswered("k8s_write"), Extra: ExtraUnstubbed}},
		{name: "post answered", plugin: "crashloop-notifier", events: crashing,
			stubs:  []Stub{{Function: "http_request", Request: json.RawMessage(wantPost), Code: 204}},
			result: "ok", call: Call{Function: "http_request", Request: json.RawMessage(wantPost), Code: 204, Stubbed: true}},
		{name: "post answered 503", plugin: "crashloop-notifier", events: crashing,
			stubs:  []Stub{{Function: "http_request", Code: 503, Response: json.RawMessage(`{"header":{"retry-after":"5"},"bodyText":"busy"}`)}},
			result: "retry-exhausted", call: Call{Function: "http_request", Request: json.RawMessage(wantPost), Code: 503, Response: json.RawMessage(`{"header":{"retry-after":"5"},"bodyText":"busy"}`), Stubbed: true},
			logSub: "upstream answered 503"},
		{name: "post timeout", plugin: "crashloop-notifier", events: crashing,
			stubs:  []Stub{{Function: "http_request", Code: -15, Message: "no answer within 5s"}},
			result: "retry-exhausted", call: Call{Function: "http_request", Request: json.RawMessage(wantPost), Code: -15, Message: "no answer within 5s", Stubbed: true},
			logSub: "ERR_TIMEOUT: no answer within 5s"},
		{name: "post unanswered", plugin: "crashloop-notifier", events: crashing,
			result: "retry-exhausted", call: Call{Function: "http_request", Request: json.RawMessage(wantPost), Code: -16,
				Message: unanswered("http_request"), Extra: ExtraUnstubbed}},
		{name: "post bad stub code", plugin: "crashloop-notifier", events: crashing,
			stubs:  []Stub{{Function: "http_request", Code: 0}},
			result: "retry-exhausted", call: Call{Function: "http_request", Request: json.RawMessage(wantPost), Code: -16,
				Message: "replay: the http_request stub's code 0 is neither an HTTP status (100-599) nor an ERR_* code", Stubbed: true}},
		{name: "event answered", plugin: "event-recorder", events: big, config: `{"maxBytes": 4}`,
			stubs:  []Stub{{Function: "event_record", Request: json.RawMessage(wantEvent)}},
			result: "ok", call: Call{Function: "event_record", Request: json.RawMessage(wantEvent), Stubbed: true}},
		{name: "event unanswered", plugin: "event-recorder", events: big, config: `{"maxBytes": 4}`,
			result: "error", call: Call{Function: "event_record", Request: json.RawMessage(wantEvent), Code: -16,
				Message: unanswered("event_record"), Extra: ExtraUnstubbed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm, err := os.ReadFile(filepath.Join("../../build/plugins", tc.plugin+".wasm"))
			if err != nil {
				t.Fatalf("example not built: run `make plugins` (make test does): %v", err)
			}
			rec, err := Read("events.jsonl", strings.NewReader(tc.events))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), Options{Plugin: tc.plugin + ".wasm", Wasm: wasm, Events: rec, Config: []byte(tc.config), Stubs: NewStubs(tc.stubs)})
			if err != nil {
				t.Fatal(err)
			}
			var step *Step
			for i := range rep.Steps {
				if rep.Steps[i].Call == "ih_handle" {
					step = &rep.Steps[i]
					break
				}
			}
			if step == nil {
				t.Fatalf("no ih_handle step: %+v", rep.Steps)
			}
			if step.Result != tc.result {
				t.Errorf("result %q (%s), want %q", step.Result, step.Message, tc.result)
			}
			if len(step.Calls) != 1 {
				t.Fatalf("calls %+v, want one %s", step.Calls, tc.call.Function)
			}
			got := step.Calls[0]
			got.Request, got.Response = canonical(got.Request), canonical(got.Response)
			want := tc.call
			want.Request, want.Response = canonical(want.Request), canonical(want.Response)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("call\n %s\nwant\n %s", gb, wb)
			}
			// An unanswered call's stub is listed once, however often
			// the event was retried.
			var missing []Stub
			if !tc.call.Stubbed && tc.call.Code == -16 && tc.call.Message == unanswered(tc.call.Function) {
				st := Stub{Function: tc.call.Function, Request: canonical(tc.call.Request)}
				if st.Function == "http_request" {
					st.Code = 200
				}
				missing = []Stub{st}
			}
			for i := range rep.MissingStubs {
				rep.MissingStubs[i].Request = canonical(rep.MissingStubs[i].Request)
			}
			if gb, wb := mustJSON(t, rep.MissingStubs), mustJSON(t, missing); gb != wb {
				t.Errorf("stubs to add\n %s\nwant\n %s", gb, wb)
			}
			if tc.logSub != "" {
				found := false
				for _, l := range step.Logs {
					found = found || strings.Contains(l.Message, tc.logSub)
				}
				if !found {
					t.Errorf("no log line with %q: %+v", tc.logSub, step.Logs)
				}
			}
		})
	}
}

// A stub file with a stub no call could use is refused, naming the stub.
func TestReadStubsRefuses(t *testing.T) {
	for _, tc := range []struct{ stubs, want string }{
		{`[{"code": 0}]`, "stubs[0]: no function"},
		{`[{"function": "event_record"}, {"function": "k8s_create"}]`, `stubs[1]: function "k8s_create" cannot be stubbed: the stubbed functions are k8s_write, http_request, event_record, children_apply and status_apply`},
		{`[{"function": "state_set"}]`, `function "state_set" cannot be stubbed`},
		{`[{"function": "http_request", "code": 0}]`, "http_request: code 0: want the HTTP status (100-599) or an ERR_* code"},
		{`[{"function": "k8s_write", "code": 2}]`, "k8s_write: code 2: want 0 or an ERR_* code"},
		{`[{"function": "status_apply", "code": 1}]`, "status_apply: code 1: want 0 or an ERR_* code"},
		{`[{"function": "reconcile_requeue_after"}]`, `function "reconcile_requeue_after" cannot be stubbed`},
	} {
		f := filepath.Join(t.TempDir(), "stubs.json")
		if err := os.WriteFile(f, []byte(`{"informerHostStubs": 1, "stubs": `+tc.stubs+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadStubs(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %v, want %q with the file's name", tc.stubs, err, tc.want)
		}
	}
	f := filepath.Join(t.TempDir(), "stubs.json")
	ok := `{"informerHostStubs": 1, "stubs": [{"function": "http_request", "code": 204}, {"function": "http_request", "code": -15}, {"function": "k8s_write", "code": -9}, {"function": "children_apply", "code": 2}, {"function": "status_apply", "code": -9}]}`
	if err := os.WriteFile(f, []byte(ok), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStubs(f); err != nil {
		t.Errorf("valid stubs refused: %v", err)
	}
}

// An http_request stub's response reaches the plugin as the host would
// give it: "Name: value\n" header lines with canonical names, sorted, and
// the body from "body" (JSON text; a JSON string is the text itself),
// "bodyText" or "bodyBase64". The recorded request shows the body as JSON
// when it is, and the header by canonical name.
func TestStubHTTPAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, response, header, body string
		reqBody                      string
		request                      string
	}{
		{name: "json body", response: `{"header":{"x-b":["1","2"],"content-type":"application/json"},"body":{"ok":true}}`,
			header: "Content-Type: application/json\nX-B: 1\nX-B: 2\n", body: `{"ok":true}`,
			reqBody: `{"a":1}`, request: `{"body":{"a":1},"header":{"Content-Type":["text/plain"]},"method":"POST","path":"/p","upstream":"u"}`},
		{name: "string body", response: `{"body":"plain"}`, body: "plain",
			reqBody: "not json", request: `{"bodyText":"not json","header":{"Content-Type":["text/plain"]},"method":"POST","path":"/p","upstream":"u"}`},
		{name: "base64 body", response: `{"bodyBase64":"/wA="}`, body: "\xff\x00",
			reqBody: "\xff", request: `{"bodyBase64":"/w==","header":{"Content-Type":["text/plain"]},"method":"POST","path":"/p","upstream":"u"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Calls{stubs: NewStubs([]Stub{{Function: "http_request", Code: 200, Response: json.RawMessage(tc.response)}})}
			var resp engine.HTTPResponse
			code, msg := stubHTTP{c}.Do(context.Background(), &engine.HTTPRequest{Upstream: "u", Method: "POST", Path: "/p",
				Header: []byte("content-type: text/plain\n"), Body: []byte(tc.reqBody)}, &resp)
			if code != 200 || msg != "" {
				t.Fatalf("code %d %q", code, msg)
			}
			if string(resp.Header) != tc.header || string(resp.Body) != tc.body {
				t.Errorf("header %q body %q, want %q %q", resp.Header, resp.Body, tc.header, tc.body)
			}
			if got := c.take(); len(got) != 1 || string(got[0].Request) != tc.request {
				t.Errorf("recorded %+v, want request %s", got, tc.request)
			}
		})
	}
}

// A write whose arguments cannot work is refused as the host refuses it
// (kubewrite.CheckArgs), recorded, and no stub is asked.
func TestStubWritesCheckArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  engine.WriteRequest
		code int32
		msg  string
	}{
		{"create with preconditions", engine.WriteRequest{Op: 1, Resource: []byte("pods"), Body: []byte(`{}`), ResourceVersion: []byte("7")}, -5, "a create takes no preconditions"},
		{"patch without a name", engine.WriteRequest{Op: 2, Resource: []byte("pods"), Body: []byte(`{}`)}, -5, "a name is required (only a create may leave it to the body)"},
		{"force on a delete", engine.WriteRequest{Op: 5, Resource: []byte("pods"), Name: []byte("a"), Force: true}, -5, "force applies to apply only"},
		{"apply without kind", engine.WriteRequest{Op: 4, Resource: []byte("pods"), Name: []byte("a"), Body: []byte(`{"apiVersion":"v1"}`)}, -5,
			`an apply's body needs kind (as in {"apiVersion":"v1","kind":"Pod","metadata":{...}}): server-side apply cannot tell the type without`},
		{"must-exist on a patch", engine.WriteRequest{Op: 2, Resource: []byte("pods"), Name: []byte("a"), Body: []byte(`{}`), MustExist: true}, -5,
			"must-exist applies to apply only (a patch never creates)"},
		{"apply", engine.WriteRequest{Op: 4, Resource: []byte("pods"), Name: []byte("a"), Body: []byte(`{"apiVersion":"v1","kind":"Pod"}`), Force: true, MustExist: true}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Calls{stubs: NewStubs([]Stub{{Function: "k8s_write"}})}
			code, msg := stubWrites{c}.Check(&tc.req)
			if code != tc.code || msg != tc.msg {
				t.Errorf("check: %d %q, want %d %q", code, msg, tc.code, tc.msg)
			}
			got := c.take()
			if tc.code == 0 {
				if len(got) != 0 {
					t.Errorf("a request that goes on is recorded by Do, not Check: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Code != tc.code || got[0].Message != tc.msg || got[0].Stubbed {
				t.Errorf("recorded %+v", got)
			}
		})
	}
}

// unanswered is the result message of a call no stub answers.
func unanswered(function string) string {
	return `replay: no stub answers this ` + function + ` call; add the one the replay prints under "stubs to add" to the stub file (--stubs)`
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A stub file with trailing text after its object is refused: the text
// is a second stub file pasted in, or an edit gone wrong, and a reader
// that stops at the first object would replay without it.
func TestReadStubsRefusesTrailingText(t *testing.T) {
	const ok = `{"informerHostStubs": 1, "stubs": [{"function": "event_record"}]}`
	for _, trail := range []string{` {"informerHostStubs": 1, "stubs": []}`, "\n]", " garbage", "\n{"} {
		f := filepath.Join(t.TempDir(), "stubs.json")
		if err := os.WriteFile(f, []byte(ok+trail), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadStubs(f)
		if err == nil || !strings.Contains(err.Error(), "after the stub file's object") || !strings.Contains(err.Error(), f) {
			t.Errorf("trailing %q: error %v, want one naming the file and the trailing text", trail, err)
		}
	}
	f := filepath.Join(t.TempDir(), "stubs.json")
	if err := os.WriteFile(f, []byte(ok+"\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStubs(f); err != nil {
		t.Errorf("trailing white space refused: %v", err)
	}
}

// The replay says where the plugin's capabilities II calls and the stub
// file part: a stub no call used (a call the recording made and the
// replay did not), a call no stub answered, and a call answered again by
// a stub its request already used (the recording made it fewer times).
// A stub without a request answers any number of calls: that is no
// divergence, but it is unused when no call reached it.
func TestStubsDivergence(t *testing.T) {
	a := json.RawMessage(`{"name":"a"}`)
	c := &Calls{stubs: NewStubs([]Stub{
		{Function: "k8s_write", Request: a},
		{Function: "k8s_write", Request: json.RawMessage(`{"name":"b"}`)},
		{Function: "event_record"},
		{Function: "http_request", Code: 200},
	})}
	c.Serve("k8s_write", map[string]string{"name": "a"})
	c.Serve("k8s_write", map[string]string{"name": "a"}) // once more than recorded
	c.Serve("k8s_write", map[string]string{"name": "x"}) // never recorded
	c.Serve("http_request", map[string]string{"path": "/p"})
	c.Serve("http_request", map[string]string{"path": "/q"})
	calls := c.take()
	var extra []string
	for _, call := range calls {
		extra = append(extra, call.Extra)
	}
	want := []string{"", "repeated", "unstubbed", "", ""}
	if strings.Join(extra, ",") != strings.Join(want, ",") {
		t.Errorf("calls' Extra %q, want %q", extra, want)
	}
	unused := c.unusedStubs()
	if len(unused) != 2 || unused[0].Index != 1 || string(unused[0].Request) != `{"name":"b"}` || unused[1].Index != 2 || unused[1].Function != "event_record" {
		t.Errorf("unused stubs %+v, want stubs[1] (write b) and stubs[2] (event_record)", unused)
	}
	if n := (&Calls{}).unusedStubs(); n != nil {
		t.Errorf("no stub file: unused %+v", n)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ function, request, want string }{
		{"k8s_write", `{"op":"apply","resource":"cms","namespace":"demo","name":"copy"}`, "k8s_write apply cms demo/copy"},
		{"k8s_write", `{"op":"create","resource":"cms","namespace":"demo","body":{"metadata":{"name":"copy"}}}`, "k8s_write create cms demo/copy"},
		{"k8s_write", `{"op":"json-patch","resource":"nodes","name":"n1","subresource":"status","body":[]}`, "k8s_write json-patch nodes n1 status"},
		{"http_request", `{"upstream":"hook","method":"POST","path":"/x"}`, "http_request POST hook /x"},
		{"event_record", `{"type":"Warning","reason":"Big","object":{"kind":"ConfigMap","namespace":"demo","name":"big"}}`, "event_record Warning Big ConfigMap demo/big"},
		{"event_record", ``, "event_record"},
		{"children_apply", `{"resource":"cms","namespace":"src","name":"a","body":[{"kind":"ConfigMap","metadata":{"name":"b","namespace":"dst"}},{"kind":"ConfigMap","metadata":{"name":"a","namespace":"dst"}}]}`, "children_apply cms src/a {ConfigMap dst/a, ConfigMap dst/b}"},
		{"status_apply", `{"resource":"cronjobs","namespace":"ns","name":"c","body":{}}`, "status_apply cronjobs ns/c"},
	} {
		if got := Describe(tc.function, json.RawMessage(tc.request)); got != tc.want {
			t.Errorf("Describe(%s, %s) = %q, want %q", tc.function, tc.request, got, tc.want)
		}
	}
}
