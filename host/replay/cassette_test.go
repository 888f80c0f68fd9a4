package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/engine"
)

// liveWrites answers writes as an apiserver would: the object with the
// next resourceVersion, or a conflict when the precondition is stale.
type liveWrites struct{ rv *int }

func (w liveWrites) Check(r *engine.WriteRequest) (int32, string) {
	if string(r.Namespace) == "forbidden" {
		return abi.ErrDenied, "not granted"
	}
	return 0, ""
}

func (w liveWrites) Do(_ context.Context, r *engine.WriteRequest) (map[string]any, int32, string) {
	if string(r.ResourceVersion) == "stale" {
		return nil, abi.ErrConflict, "the object has been modified"
	}
	*w.rv++
	return map[string]any{"metadata": map[string]any{"name": string(r.Name), "resourceVersion": strconv.Itoa(*w.rv)}}, 0, ""
}

type liveHTTP struct{}

func (liveHTTP) Do(_ context.Context, r *engine.HTTPRequest, resp *engine.HTTPResponse) (int32, string) {
	if r.Path == "/down" {
		return abi.ErrUnavailable, "connection refused"
	}
	resp.Header = append(resp.Header[:0], "Content-Type: application/json\nSet-Cookie: a=1\nSet-Cookie: b=2\n"...)
	resp.Body = append(resp.Body[:0], `{ "spaced": [1, 2],  "html": "<&>" }`...)
	return 201, ""
}

type liveEvents struct{}

func (liveEvents) Record(_ context.Context, obj map[string]any, _, reason, _ string) (int32, string) {
	if reason == "" {
		return abi.ErrInvalid, "a reason is required"
	}
	return 0, ""
}

// The cassette's stubs, written and read back as a stub file, answer the
// same calls in a replay exactly as they were answered live: the write's
// object, a conflict, a grant's refusal, an HTTP response byte for byte
// (a JSON body's spacing, repeated header values), an HTTP error, an
// Event and a refused one; a call repeated gets each answer in turn.
func TestCassetteAnswersAsLive(t *testing.T) {
	write := func(ns, rv string) *engine.WriteRequest {
		return &engine.WriteRequest{Op: abi.WriteApply, Resource: []byte("pods"), Namespace: []byte(ns), Name: []byte("web"),
			Body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"}}`), ResourceVersion: []byte(rv)}
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "shop"}}
	type answer struct {
		Obj    map[string]any
		Code   int32
		Msg    string
		Header string
		Body   string
	}
	calls := []struct {
		name string
		call func(o engine.InstanceOptions) answer
	}{
		{"apply", func(o engine.InstanceOptions) answer {
			obj, code, msg := o.Writes.Do(context.Background(), write("shop", "1"))
			return answer{Obj: obj, Code: code, Msg: msg}
		}},
		{"apply again, the next answer", func(o engine.InstanceOptions) answer {
			obj, code, msg := o.Writes.Do(context.Background(), write("shop", "1"))
			return answer{Obj: obj, Code: code, Msg: msg}
		}},
		{"conflict", func(o engine.InstanceOptions) answer {
			obj, code, msg := o.Writes.Do(context.Background(), write("shop", "stale"))
			return answer{Obj: obj, Code: code, Msg: msg}
		}},
		{"denied by the grant", func(o engine.InstanceOptions) answer {
			// Live the grant refuses it in Check; the replay grants
			// every call, and the stub answers its Do the same.
			if code, msg := o.Writes.Check(write("forbidden", "1")); code != 0 {
				return answer{Code: code, Msg: msg}
			}
			obj, code, msg := o.Writes.Do(context.Background(), write("forbidden", "1"))
			return answer{Obj: obj, Code: code, Msg: msg}
		}},
		{"post", func(o engine.InstanceOptions) answer {
			var resp engine.HTTPResponse
			code, msg := o.HTTP.Do(context.Background(), &engine.HTTPRequest{Upstream: "hook", Method: "POST", Path: "/x",
				Header: []byte("Content-Type: application/json"), Body: []byte(`{"a":1}`)}, &resp)
			return answer{Code: code, Msg: msg, Header: string(resp.Header), Body: string(resp.Body)}
		}},
		{"post unavailable", func(o engine.InstanceOptions) answer {
			var resp engine.HTTPResponse
			code, msg := o.HTTP.Do(context.Background(), &engine.HTTPRequest{Upstream: "hook", Method: "GET", Path: "/down"}, &resp)
			return answer{Code: code, Msg: msg}
		}},
		{"event", func(o engine.InstanceOptions) answer {
			code, msg := o.Events.Record(context.Background(), pod, "Normal", "Seen", "seen it")
			return answer{Code: code, Msg: msg}
		}},
		{"event refused", func(o engine.InstanceOptions) answer {
			code, msg := o.Events.Record(context.Background(), pod, "Normal", "", "")
			return answer{Code: code, Msg: msg}
		}},
	}
	rv := 0
	c := &Cassette{}
	liveOpts := engine.InstanceOptions{Writes: liveWrites{&rv}, HTTP: liveHTTP{}, Events: liveEvents{}}
	c.Wrap(&liveOpts)
	var live []answer
	for _, tc := range calls {
		live = append(live, tc.call(liveOpts))
	}
	var file bytes.Buffer
	if err := WriteStubs(&file, c.Stubs()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stubs.json")
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	stubs, err := ReadStubs(path)
	if err != nil {
		t.Fatalf("the cassette's stub file does not read: %v\n%s", err, file.Bytes())
	}
	calls2 := &Calls{stubs: stubs}
	var replayed engine.InstanceOptions
	stubbed(&replayed, calls2)
	for i, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			gb, _ := json.Marshal(tc.call(replayed))
			wb, _ := json.Marshal(live[i])
			if !bytes.Equal(gb, wb) {
				t.Errorf("replayed %s\nlive     %s\nstub file:\n%s", gb, wb, file.Bytes())
			}
		})
	}
	for _, call := range calls2.take() {
		if !call.Stubbed {
			t.Errorf("a call no stub answered: %+v", call)
		}
	}
}
