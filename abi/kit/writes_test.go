package kit

import (
	"errors"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// writesHost adds k8s_write and result_message to fakeHost: it records
// each call and answers with code (a handle when non-negative) and msg.
type writesHost struct {
	*fakeHost
	calls []string
	code  int32
	msg   string
}

func (h *writesHost) k8sWrite(op int32, t Target, body []byte, p Preconditions, flags int32) int32 {
	h.calls = append(h.calls, strings.Join([]string{abi.WriteVerb(op), t.Resource, t.Namespace, t.Name, t.Subresource,
		string(body), p.UID, p.ResourceVersion, map[int32]string{0: "", abi.WriteForce: "force", abi.WriteMustExist: "mustExist",
			abi.WriteForce | abi.WriteMustExist: "force,mustExist"}[flags]}, "|"))
	return h.code
}

func (h *writesHost) resultMessage(buf []byte) int32 {
	if len(h.msg) <= len(buf) {
		copy(buf, h.msg)
	}
	return int32(len(h.msg))
}

func TestWrites(t *testing.T) {
	h := &writesHost{fakeHost: &fakeHost{}, code: abi.FirstHandle}
	c := Cluster{p: &plugin{host: h}}
	pods := Target{Resource: "pods", Namespace: "ns", Name: "p"}
	if got, err := c.Apply(pods, []byte(`{}`), true, Preconditions{UID: "u"}); err != nil || got.h != abi.FirstHandle {
		t.Fatalf("Apply: %v %v", got, err)
	}
	if _, err := c.MergePatch(Target{Resource: "pods", Namespace: "ns", Name: "p", Subresource: "status"}, []byte(`{"status":{}}`), Preconditions{ResourceVersion: "5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyWith(pods, []byte(`{}`), ApplyOptions{MustExist: true}, Preconditions{}); err != nil {
		t.Fatal(err)
	}
	h.code = 0
	if err := c.Delete(pods, Preconditions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"apply|pods|ns|p||{}|u||force", `patch|pods|ns|p|status|{"status":{}}||5|`, "apply|pods|ns|p||{}|||mustExist", "delete|pods|ns|p|||||"}
	if strings.Join(h.calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls\n%s\nwant\n%s", strings.Join(h.calls, "\n"), strings.Join(want, "\n"))
	}
	// Errors carry the code and the message, longer than the first buffer.
	for code, sentinel := range map[int32]error{abi.ErrForbidden: ErrForbidden, abi.ErrConflict: ErrConflict,
		abi.ErrAbsent: ErrNoObject, abi.ErrRateLimited: ErrRateLimited, abi.ErrCanceled: ErrCanceled, abi.ErrDenied: ErrDenied,
		abi.ErrFieldConflict: ErrFieldConflict} {
		h.code, h.msg = code, strings.Repeat("m", 3000)
		_, err := c.Create(pods, []byte(`{}`))
		var we *CallError
		if !errors.As(err, &we) || !errors.Is(err, sentinel) || we.Message != h.msg {
			t.Errorf("code %d: %v, want a CallError matching %v with the whole message", code, err, sentinel)
		}
	}
	// Without the writes import (another platform), everything is denied.
	if _, err := (Cluster{p: &plugin{host: &fakeHost{}}}).Create(pods, nil); !errors.Is(err, ErrDenied) {
		t.Errorf("no writes import: %v, want ErrDenied", err)
	}
}
