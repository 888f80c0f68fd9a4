package kit

import (
	"errors"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// outboundHost adds the Events and HTTP imports to fakeHost.
type outboundHost struct {
	*fakeHost
	events  []string
	req     []string // method path header body
	status  int32
	header  string
	body    string
	message string // result_message after a failure
}

func (h *outboundHost) eventRecord(_, _ int32, reason, msg string) int32 {
	if reason == "" {
		h.message = "reason is required"
		return abi.ErrInvalid
	}
	h.events = append(h.events, reason+"|"+msg)
	return 0
}

func (h *outboundHost) httpRequest(up, method, path string, header, body []byte) int32 {
	h.req = append(h.req, up+" "+method+" "+path+" "+string(header)+" "+string(body))
	if h.status < 0 {
		h.message = "did not answer within its timeout (3s)"
	}
	return h.status
}

func (h *outboundHost) httpResponseRead(part int32, buf []byte) int32 {
	if part == abi.HTTPHeader {
		return copySized(buf, []byte(h.header))
	}
	return copySized(buf, []byte(h.body))
}

func (h *outboundHost) resultMessage(buf []byte) int32 { return copySized(buf, []byte(h.message)) }

func TestUpstream(t *testing.T) {
	h := &outboundHost{fakeHost: &fakeHost{}, status: 201, header: "Content-Type: text/plain\nX-A: 1\nX-A: 2\n", body: strings.Repeat("b", 3000)}
	u := Upstream{p: &plugin{host: h}, name: "hook"}
	r, err := u.Post("/x", "application/json", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if h.req[0] != "hook POST /x Content-Type: application/json\n {}" {
		t.Errorf("request %q", h.req[0])
	}
	if r.Status != 201 || len(r.Body) != 3000 || strings.Join(r.Header["X-A"], ",") != "1,2" || r.Header["Content-Type"][0] != "text/plain" {
		t.Errorf("response %d %d %v", r.Status, len(r.Body), r.Header)
	}
	h.status = abi.ErrTimeout
	_, err = u.Get("/slow")
	var ce *CallError
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &ce) || ce.Message != "did not answer within its timeout (3s)" {
		t.Errorf("timeout: %v", err)
	}
	if _, err := HTTP("x").Get("/"); !errors.Is(err, ErrDenied) {
		t.Errorf("without a host: %v, want ErrDenied", err)
	}
}

func TestRecordEvent(t *testing.T) {
	h := &outboundHost{fakeHost: &fakeHost{}}
	p := &plugin{host: h}
	ev := &Event{p: p}
	if err := ev.RecordEvent(Warning, "TooLarge", "big"); err != nil {
		t.Fatal(err)
	}
	err := ev.RecordEvent(Normal, "", "x")
	if !errors.Is(err, HostError(abi.ErrInvalid)) || !strings.Contains(err.Error(), "reason is required") {
		t.Errorf("invalid: %v", err)
	}
	if len(h.events) != 1 {
		t.Errorf("events %q", h.events)
	}
}

// A CallError's text is the call, the code's name and the host's
// message, each left out when there is none.
func TestCallErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  CallError
		want string
	}{
		{CallError{Func: "k8s_write", Call: writeCall(abi.WriteApply, Target{Resource: "configmaps", Namespace: "demo", Name: "x"}, 0),
			Code: abi.ErrRateLimited, Message: "would wait 12s"}, "k8s_write apply configmaps demo/x: ERR_RATE_LIMITED: would wait 12s"},
		{CallError{Func: "k8s_write", Call: writeCall(abi.WriteCreate, Target{Resource: "apps/v1/deployments", Namespace: "demo"}, 0),
			Code: abi.ErrExists}, "k8s_write create apps/v1/deployments in demo: ERR_EXISTS"},
		{CallError{Func: "k8s_write", Call: writeCall(abi.WriteMergePatch, Target{Resource: "nodes", Name: "n1", Subresource: "status"}, 0),
			Code: abi.ErrForbidden, Message: "no"}, "k8s_write merge-patch nodes/status n1: ERR_FORBIDDEN: no"},
		{CallError{Func: "k8s_write", Call: writeCall(9, Target{Resource: "pods", Namespace: "ns", Name: "p"}, abi.WriteForce|abi.WriteMustExist),
			Code: abi.ErrInvalid}, "k8s_write op 9 --force --must-exist pods ns/p: ERR_INVALID"},
		{CallError{Code: -99, Message: "m"}, "error -99: m"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
