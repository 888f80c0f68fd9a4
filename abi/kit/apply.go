package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// Obj is an object built from maps, for apply bodies and children
// without a Go type: NewObj gives it apiVersion, kind and metadata, Set
// adds fields by path. It is a map[string]any, so it marshals as itself
// (Apply, Children.Add) and may be built or changed as a map.
type Obj map[string]any

// NewObj starts an object; namespace "" for a cluster-scoped one (or, as
// a child, one in the primary's namespace).
func NewObj(apiVersion, kind, namespace, name string) Obj {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return Obj{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

// Set sets the field at path (dotted keys, ["..."] for keys with dots,
// as Event.Field reads them; no [n] indexes) to v, creating the objects
// on the way, and returns o. A time.Time is written as Kubernetes writes
// one (RFC 3339, UTC, seconds). A path that does not parse panics: paths
// are constants in the plugin's code, and the kit reports the panic with
// its site.
func (o Obj) Set(path string, v any) Obj {
	setPath(o, path, v)
	return o
}

// Label sets metadata.labels[key] and returns o.
func (o Obj) Label(key, value string) Obj {
	return o.Set(abi.JoinPath("metadata", "labels", key), value)
}

// Annotate sets metadata.annotations[key] and returns o.
func (o Obj) Annotate(key, value string) Obj {
	return o.Set(abi.JoinPath("metadata", "annotations", key), value)
}

func setPath(m map[string]any, path string, v any) {
	segs, err := abi.ParsePath(path)
	if err != nil {
		panic(fmt.Sprintf("kit: field path %q: %v", path, err))
	}
	for i, s := range segs {
		if s.IsIndex {
			panic(fmt.Sprintf("kit: field path %q: an index ([%d]) cannot be set; set the whole list", path, s.Index))
		}
		if i == len(segs)-1 {
			m[s.Key] = normalize(v)
			return
		}
		next, ok := m[s.Key].(map[string]any)
		if !ok {
			if o, isObj := m[s.Key].(Obj); isObj {
				next = o
			} else {
				next = map[string]any{}
				m[s.Key] = next
			}
		}
		m = next
	}
}

// normalize writes times as metav1.Time does: encoding/json would give
// the local zone and nanoseconds, which the apiserver accepts but then
// returns differently, so every apply would look like a change.
func normalize(v any) any {
	switch t := v.(type) {
	case time.Time:
		return Timestamp(t)
	case *time.Time:
		if t == nil {
			return nil
		}
		return Timestamp(*t)
	}
	return v
}

// Timestamp is t as Kubernetes writes a time: RFC 3339 in UTC, seconds.
func Timestamp(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// Apply is the JSON body of a server-side apply (Cluster.Apply, a child)
// from obj: an Obj, a map[string]any or any value encoding/json marshals
// (a struct with json tags, a k8s.io/api type). It must have apiVersion,
// kind and metadata.name: the error names what is missing.
func Apply(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("the object does not marshal to JSON: %w", err)
	}
	var id struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return nil, fmt.Errorf("the object is not a JSON object: %s", abbrev(b))
	}
	switch {
	case id.APIVersion == "":
		return nil, fmt.Errorf("the object has no apiVersion: %s", abbrev(b))
	case id.Kind == "":
		return nil, fmt.Errorf("the object has no kind: %s", abbrev(b))
	case id.Metadata.Name == "":
		return nil, fmt.Errorf("the %s has no metadata.name: %s", id.Kind, abbrev(b))
	}
	return b, nil
}

// abbrev is JSON as an error quotes it: at most 120 bytes.
func abbrev(b []byte) string {
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}

// Children is the complete set of children a key wants (Result.Children).
// The zero value is an empty set: returned as it is, every child the host
// applied for the key before is deleted.
type Children struct {
	items   [][]byte
	err     error // the first Add that failed
	applied bool  // Apply was called and nothing was added since
}

// Add adds a child: an Obj, a map[string]any or any value encoding/json
// marshals, with apiVersion, kind and metadata.name; metadata.namespace
// defaults to the primary's. Its resource must be one of the plugin's
// controller.owns. The host adds the owner bookkeeping (ownerReference,
// label, annotation): leave them out. An object that cannot be a child is
// the error, and the reconcile's too if it returns the set anyway.
func (c *Children) Add(obj any) error {
	b, err := Apply(obj)
	if err != nil {
		err = fmt.Errorf("child %d: %w", len(c.items)+1, err)
		if c.err == nil {
			c.err = err
		}
		return err
	}
	c.items = append(c.items, b)
	c.applied = false
	return nil
}

// Len is the number of children in the set.
func (c *Children) Len() int { return len(c.items) }

// JSON is the set as children_apply receives it: a JSON array.
func (c *Children) JSON() []byte {
	b := []byte{'['}
	for i, it := range c.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// Apply applies the set now, during Reconcile (ctx is Reconcile's),
// instead of when Reconcile returns: for a reconciler that reacts to
// failed children itself (a condition, a Retry). A *ChildrenError lists
// the children that failed; any other error is the call's (ERR_DENIED for
// a child of a resource not in controller.owns, ERR_INVALID,
// ERR_CANCELED). Returned in Result.Children afterwards, the set is not
// applied a second time.
func (c *Children) Apply(ctx context.Context) error {
	call, ok := ctx.Value(reconcileKey{}).(*reconcileCall)
	if !ok {
		return errors.New("Children.Apply: not called with the context of a Reconcile call")
	}
	return c.apply(call.p, call.req)
}

func (c *Children) apply(p *plugin, req Request) error {
	if c.err != nil {
		return c.err
	}
	api := p.controller()
	n := api.childrenApply(c.JSON())
	switch {
	case n < 0:
		return &CallError{Func: abi.ImportChildrenApply, Call: strconv.Itoa(len(c.items)) + " children of " + req.Key(),
			Code: n, Message: p.resultMessage(api)}
	case n > 0:
		c.applied = true
		return &ChildrenError{Primary: req.Key(), Failures: parseFailures(p.resultMessage(api), n)}
	}
	c.applied = true
	return nil
}

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Condition is one entry of status.conditions, as metav1.Condition has
// it. The host sets ObservedGeneration (the primary's generation) and
// LastTransitionTime (kept while Status does not change) when it applies
// them: leave both zero.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"` // ConditionTrue, ConditionFalse or ConditionUnknown
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time `json:"-"`
}

// MarshalJSON writes LastTransitionTime as Kubernetes does, and not at
// all when zero (the host fills it).
func (c Condition) MarshalJSON() ([]byte, error) {
	type plain Condition
	out := struct {
		plain
		LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	}{plain: plain(c)}
	if !c.LastTransitionTime.IsZero() {
		out.LastTransitionTime = Timestamp(c.LastTransitionTime)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a condition as the apiserver returns it.
func (c *Condition) UnmarshalJSON(b []byte) error {
	type plain Condition
	var in struct {
		plain
		LastTransitionTime string `json:"lastTransitionTime"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*c = Condition(in.plain)
	if in.LastTransitionTime != "" {
		t, err := time.Parse(time.RFC3339, in.LastTransitionTime)
		if err != nil {
			return fmt.Errorf("condition %s: lastTransitionTime: %w", c.Type, err)
		}
		c.LastTransitionTime = t
	}
	return nil
}

// Status is the status this plugin owns on the primary (Result.Status):
// fields and conditions, applied by the host to the status subresource
// as the plugin's field manager, so fields other managers own stay.
// Fields this plugin applied before and leaves out now are removed
// (server-side apply's rule): set every field the plugin owns, each time.
type Status struct {
	fields map[string]any
	conds  []Condition
	err    error
}

// Set sets the status field at path (relative to status: "active",
// "summary.ready"; syntax as Obj.Set) to v: any value encoding/json
// marshals; a time.Time as Kubernetes writes one. Conditions are set
// with SetCondition, which wins over a "conditions" field set here.
func (s *Status) Set(path string, v any) *Status {
	if s.fields == nil {
		s.fields = map[string]any{}
	}
	setPath(s.fields, path, v)
	return s
}

// SetCondition sets the condition of c.Type, as meta.SetStatusCondition
// does: a new type is added, an existing one replaced (its
// LastTransitionTime kept when Status is unchanged); it reports whether
// the set changed. A condition without a Type, or whose Status is not
// True, False or Unknown, is an error of the reconcile that returns it.
func (s *Status) SetCondition(c Condition) (changed bool) {
	switch {
	case c.Type == "":
		s.fail(fmt.Errorf("status: a condition needs a Type (status %q, reason %q)", c.Status, c.Reason))
		return false
	case c.Status != ConditionTrue && c.Status != ConditionFalse && c.Status != ConditionUnknown:
		s.fail(fmt.Errorf("status: condition %s: status is %q, want True, False or Unknown", c.Type, c.Status))
		return false
	}
	for i, old := range s.conds {
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = old.LastTransitionTime
		}
		s.conds[i] = c
		return old != c
	}
	s.conds = append(s.conds, c)
	return true
}

// Condition returns the condition of type typ set so far.
func (s *Status) Condition(typ string) (Condition, bool) {
	for _, c := range s.conds {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

func (s *Status) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// JSON is the status as status_apply receives it: a JSON object.
func (s *Status) JSON() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	out := make(map[string]any, len(s.fields)+1)
	for k, v := range s.fields {
		out[k] = v
	}
	if len(s.conds) > 0 {
		out["conditions"] = s.conds
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return b, nil
}

func (s *Status) apply(p *plugin, req Request) error {
	body, err := s.JSON()
	if err != nil {
		return err
	}
	api := p.controller()
	switch code := api.statusApply(body); {
	case code == abi.ErrAbsent:
		// The primary is gone (or went during the call): there is no
		// status to write, and its absent reconcile follows.
		return nil
	case code < 0:
		return &CallError{Func: abi.ImportStatusApply, Call: req.Key(), Code: code, Message: p.resultMessage(api)}
	}
	return nil
}

// Conditions returns the object's status.conditions (none when it has
// none): what the last status apply left, to compare with.
func (o Cached) Conditions() ([]Condition, error) {
	b, err := o.p.object(o.h)
	if err != nil {
		return nil, err
	}
	var v struct {
		Status struct {
			Conditions []Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(bytes.Clone(b), &v); err != nil {
		return nil, fmt.Errorf("status.conditions: %w", err)
	}
	return v.Status.Conditions, nil
}
