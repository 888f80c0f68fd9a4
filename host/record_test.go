package host

import (
	"encoding/json"
	"reflect"
	"testing"

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
