package replay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/engine"
)

// controllerRequest is a children_apply or status_apply call as the
// output records it and a stub's request matches it: the key reconciled
// (its resource by config name) and the body the plugin gave. The key is
// part of it so that two keys given the same body (two "[]") are two
// calls of the recording, not one.
type controllerRequest struct {
	Resource  string          `json:"resource"`
	Namespace string          `json:"namespace,omitempty"`
	Name      string          `json:"name"`
	Body      json.RawMessage `json:"body"`
}

// given is what one reconcile call gave the host: the bodies of its last
// children_apply and status_apply (nil: none made) and its requeue-after.
// A children_apply is the key's complete set, and a status_apply the
// fields the plugin owns, so the last of each is what the call leaves.
type given struct {
	children, status []byte
	requeue          time.Duration
}

func (g *given) child(body []byte)     { g.children = append([]byte{}, body...) }
func (g *given) state(body []byte)     { g.status = append([]byte{}, body...) }
func (g *given) after(d time.Duration) { g.requeue = d }

// stubController serves a replayed reconcile's controller functions from
// the stubs, as stubWrites serves k8s_write: the replay grants every
// call, and the stub (the recorded answer) decides it. The requeue-after
// needs no answer: it is recorded, and compared with the recording's.
type stubController struct {
	calls *Calls
	key   controllerRequest
	given
}

func (s *stubController) request(body []byte) controllerRequest {
	r := s.key
	r.Body = json.RawMessage(body) // valid JSON: the engine checked it
	return r
}

func (s *stubController) RequeueAfter(d time.Duration) {
	s.after(d)
	s.calls.Record(abi.ImportReconcileRequeueAfter, map[string]int64{"millis": d.Milliseconds()}, nil, 0)
}

// ApplyChildren answers from the stub whose code is children_apply's
// result: the number of children that failed, or an ERR_* code.
func (s *stubController) ApplyChildren(_ context.Context, body []byte) (failed int32, code int32, msg string) {
	s.child(body)
	_, code, msg = s.calls.Serve(abi.ImportChildrenApply, s.request(body))
	if code > 0 {
		return code, 0, msg
	}
	return 0, code, msg
}

func (s *stubController) ApplyStatus(_ context.Context, body []byte) (int32, string) {
	s.state(body)
	_, code, msg := s.calls.Serve(abi.ImportStatusApply, s.request(body))
	if code > 0 {
		return s.calls.amend(abi.ErrUnavailable, fmt.Sprintf("replay: the status_apply stub's code %d: want 0 or an ERR_* code", code))
	}
	return code, msg
}

// reconcile replays a reconcile line: one ih_reconcile call with the
// line's key, object and flags. It is not delivered again when answered
// RETRY: the recording holds each call the host's queue made, retries
// included, as lines of their own.
func (r *runner) reconcile(ctx context.Context, l *Line) {
	var obj *unstructured.Unstructured
	if l.Object != nil {
		obj = &unstructured.Unstructured{Object: l.Object}
	}
	ref := r.o.Events.Ref(l)
	ctl := &stubController{calls: r.calls, key: controllerRequest{Resource: l.Resource, Namespace: l.Namespace, Name: l.Name}}
	desc := "reconcile " + l.Resource + " " + key(l.Namespace, l.Name)
	switch {
	case obj == nil:
		desc += " (absent)"
	case l.Deleting:
		desc += " (deleting)"
	}
	step := Step{Line: l.line, Call: "ih_reconcile", Event: desc, Attempt: 1, Recorded: l.Result}
	r.rep.Counts.Events++
	res, err := r.inst.Reconcile(ctx, &engine.ReconcileRequest{Env: engine.NewReconcileEnvelope(ref, l.Namespace, l.Name, obj),
		Flags: l.ReconcileFlags(), Call: ctl})
	if err != nil {
		r.failedCall(step, err)
		return
	}
	r.answered(&step, res)
	if res.Code == engine.CodeRetry {
		r.rep.Counts.Retries++
	}
	step.Children, step.Status, step.RequeueAfterMillis = canonical(ctl.children), canonical(ctl.status), ctl.requeue.Milliseconds()
	if l.Result != "" {
		step.Differs = l.differs(&ctl.given)
	}
	r.finish(step)
}

// differs names what a replayed reconcile gave the host that the
// recorded one (l) did not: its children set, its status body, its
// requeue-after. A line without a result (written by hand) compares
// nothing.
func (l *Line) differs(g *given) []string {
	var out []string
	if d := childrenDiffer(l.Children, g.children); d != "" {
		out = append(out, "children: "+d)
	}
	rec, got := canonical(l.Status), canonical(g.status)
	switch {
	case rec == nil && got != nil:
		out = append(out, fmt.Sprintf("status: recorded no status_apply call, replayed %s", clip(got)))
	case rec != nil && got == nil:
		out = append(out, fmt.Sprintf("status: recorded %s, replayed no status_apply call", clip(rec)))
	case !bytes.Equal(rec, got):
		out = append(out, fmt.Sprintf("status: recorded %s, replayed %s", clip(rec), clip(got)))
	}
	if rec, got := l.RequeueAfterMillis, g.requeue.Milliseconds(); rec != got {
		out = append(out, fmt.Sprintf("requeue-after: recorded %s, replayed %s", millis(rec), millis(got)))
	}
	return out
}

func millis(ms int64) string {
	if ms == 0 {
		return "none"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// clip shortens a JSON body for a message.
func clip(b []byte) string {
	const n = 300
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// childrenDiffer compares two children sets (children_apply bodies; nil:
// no call) as sets, by each child's kind and name, then by body: "" when
// they are the same.
func childrenDiffer(recorded, replayed []byte) string {
	switch {
	case recorded == nil && replayed == nil:
		return ""
	case recorded == nil:
		return "recorded no children_apply call, replayed " + describeChildren(replayed)
	case replayed == nil:
		return "recorded " + describeChildren(recorded) + ", replayed no children_apply call"
	}
	// A recording blanks its Secret children's values (unless it keeps
	// them, --keep-secret-data): the replayed ones are blanked alike, to
	// compare the rest.
	rec, got := childSet(recorded), childSet(replayed)
	if bytes.Equal(canonical(recorded), canonical(RedactChildren(recorded))) {
		got = childSet(RedactChildren(replayed))
	}
	if !slices.Equal(sortedKeys(rec), sortedKeys(got)) {
		return "recorded " + describeChildren(recorded) + ", replayed " + describeChildren(replayed)
	}
	var changed []string
	for _, id := range sortedKeys(rec) {
		if !bytes.Equal(rec[id], got[id]) {
			changed = append(changed, fmt.Sprintf("%s: recorded %s, replayed %s", id, clip(rec[id]), clip(got[id])))
		}
	}
	return strings.Join(changed, "; ")
}

// childSet indexes a children_apply body by child: "Kind ns/name" (the
// namespace as the child gives it) -> its canonical JSON.
func childSet(body []byte) map[string][]byte {
	var children []map[string]any
	_ = json.Unmarshal(body, &children)
	out := map[string][]byte{}
	for i, c := range children {
		u := unstructured.Unstructured{Object: c}
		id := cmp.Or(u.GetKind(), "?") + " " + key(u.GetNamespace(), u.GetName())
		if _, dup := out[id]; dup || u.GetName() == "" {
			id = fmt.Sprintf("%s #%d", id, i)
		}
		b, _ := json.Marshal(c)
		out[id] = b
	}
	return out
}

func sortedKeys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }

// describeChildren names a children set for a person: "{ConfigMap
// dst/a, ConfigMap dst/b}", "{}" for none.
func describeChildren(body []byte) string {
	return "{" + strings.Join(sortedKeys(childSet(body)), ", ") + "}"
}

// LastApplied is the annotation kubectl apply keeps the applied object
// in, Secret values included.
const LastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// RedactSecret returns a copy of the Secret obj whose data and stringData
// values are "" (the keys stay: a plugin may look for them), and whose
// last-applied-configuration annotation is redacted the same way. obj is
// the informer's, shared with its cache: it is not changed.
func RedactSecret(obj map[string]any) map[string]any {
	out := maps.Clone(obj)
	for _, field := range []string{"data", "stringData"} {
		if m, ok := out[field].(map[string]any); ok {
			blank := make(map[string]any, len(m))
			for k := range m {
				blank[k] = ""
			}
			out[field] = blank
		}
	}
	md, _ := out["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if applied, ok := ann[LastApplied].(string); ok {
		// The annotation is JSON of the applied Secret; one that does not
		// parse is dropped whole rather than kept with its values.
		var inner map[string]any
		redacted := ""
		if json.Unmarshal([]byte(applied), &inner) == nil {
			b, _ := json.Marshal(RedactSecret(inner))
			redacted = string(b)
		}
		ann = maps.Clone(ann)
		ann[LastApplied] = redacted
		md = maps.Clone(md)
		md["annotations"] = ann
		out["metadata"] = md
	}
	return out
}

// isSecret reports whether obj is a core Secret.
func isSecret(obj map[string]any) bool { return obj["apiVersion"] == "v1" && obj["kind"] == "Secret" }

// RedactChildren returns a children_apply body with each Secret child's
// values blanked (RedactSecret), as a recording writes a reconcile
// line's children; other children, and a body that is not an array, are
// kept as they are.
func RedactChildren(body json.RawMessage) json.RawMessage {
	var children []map[string]any
	if json.Unmarshal(body, &children) != nil || !slices.ContainsFunc(children, isSecret) {
		return body
	}
	for i, c := range children {
		if isSecret(c) {
			children[i] = RedactSecret(c)
		}
	}
	b, err := json.Marshal(children)
	if err != nil {
		return body
	}
	return b
}
