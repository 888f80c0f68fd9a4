package controllerwrites

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// conditionReason is metav1.Condition's reason pattern (its CRD schema's
// and the apimachinery validation's): a CamelCase word.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// ApplyStatus server-side applies status (a JSON object: the status
// fields this plugin owns) to the primary's status subresource, as the
// plugin's field manager with force: fields other managers own stay.
// Conditions (status.conditions) are metav1.Conditions: type and status
// (True, False or Unknown) are required, a reason when given is a
// CamelCase word (metav1.Condition's schema requires one: without it the
// apiserver's answer names the field); the host sets
// observedGeneration to the primary's metadata.generation and keeps
// lastTransitionTime from the cached primary's condition of the same
// type while its status is unchanged (meta.SetStatusCondition), else
// sets it to now.
//
// Errors: ERR_ABSENT (primary nil), ERR_INVALID (not an object, a bad
// condition), ERR_DENIED (the write grant lacks the status subresource),
// and the write's codes (kubewrite).
func (w *Writer) ApplyStatus(ctx context.Context, primary *unstructured.Unstructured, status []byte) error {
	if primary == nil {
		return &Error{abi.ErrAbsent, fmt.Sprintf("%s is absent: there is no status to write", w.o.Primary.Kind)}
	}
	st, err := w.statusBody(primary, status)
	if err != nil {
		return err
	}
	md := map[string]any{"name": primary.GetName()}
	if ns := primary.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": w.o.Primary.GVR.GroupVersion().String(), "kind": w.o.Primary.Kind, "metadata": md, "status": st,
	})
	if err != nil {
		return &Error{abi.ErrInvalid, "status: " + err.Error()}
	}
	r := &kubewrite.Request{Op: abi.WriteApply, Resource: w.o.Primary.Name, Namespace: primary.GetNamespace(),
		Name: primary.GetName(), Sub: "status", Body: body, Force: true}
	code, msg := w.o.Writes.Check(r)
	if code == 0 {
		_, code, msg = w.o.Writes.Do(ctx, r)
	}
	if code != 0 {
		return &Error{code, "status: " + msg}
	}
	return nil
}

// statusBody validates the plugin's status and completes its conditions.
func (w *Writer) statusBody(primary *unstructured.Unstructured, status []byte) (map[string]any, error) {
	invalid := func(format string, a ...any) error {
		return &Error{abi.ErrInvalid, "status: " + fmt.Sprintf(format, a...)}
	}
	dec := json.NewDecoder(bytes.NewReader(status))
	dec.UseNumber()
	var st map[string]any
	if err := dec.Decode(&st); err != nil || st == nil || dec.More() {
		return nil, invalid(`must be one JSON object, the status fields this plugin owns (e.g. {"conditions":[...]}): %v`, err)
	}
	raw, ok := st["conditions"]
	if !ok {
		return st, nil
	}
	items, ok := raw.([]any)
	if !ok {
		return nil, invalid("conditions must be a JSON array of conditions")
	}
	// What the cluster has: a condition whose status is unchanged keeps
	// its lastTransitionTime.
	var have []metav1.Condition
	if cur, found, _ := unstructured.NestedSlice(primary.Object, "status", "conditions"); found {
		for _, c := range cur {
			var hc metav1.Condition
			if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &hc) == nil {
				have = append(have, hc)
			}
		}
	}
	now := metav1.NewTime(w.now().UTC().Truncate(1e9)) // the API keeps seconds
	out := make([]any, 0, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, invalid("condition %d is not a JSON object", i)
		}
		str := func(f string) string { s, _ := m[f].(string); return s }
		c := metav1.Condition{Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"),
			Message: str("message"), ObservedGeneration: primary.GetGeneration(), LastTransitionTime: now}
		switch {
		case c.Type == "":
			return nil, invalid("condition %d needs a type (e.g. \"Ready\")", i)
		case len(validation.IsQualifiedName(c.Type)) > 0 || len(c.Type) > 316:
			return nil, invalid("condition %d: type %q is not a qualified name (e.g. \"Ready\", \"example.com/Synced\")", i, c.Type)
		case seen[c.Type]:
			return nil, invalid("condition type %q is given twice", c.Type)
		case c.Status != metav1.ConditionTrue && c.Status != metav1.ConditionFalse && c.Status != metav1.ConditionUnknown:
			return nil, invalid("condition %q: status %q must be True, False or Unknown", c.Type, c.Status)
		case c.Reason != "" && (len(c.Reason) > 1024 || !conditionReason.MatchString(c.Reason)):
			return nil, invalid("condition %q: reason %q must be a CamelCase word (letters, digits, _ , :), at most 1024 characters", c.Type, c.Reason)
		case len(c.Message) > 32768:
			return nil, invalid("condition %q: message is %d bytes, more than 32768", c.Type, len(c.Message))
		}
		seen[c.Type] = true
		meta.SetStatusCondition(&have, c)
		set := meta.FindStatusCondition(have, c.Type)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(set)
		if err != nil {
			return nil, invalid("condition %q: %v", c.Type, err)
		}
		if c.Reason == "" {
			delete(u, "reason") // not "": let a schema that requires one say so
		}
		out = append(out, u)
	}
	st["conditions"] = out
	return st, nil
}
