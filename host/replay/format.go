package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
)

// FormatVersion is the version of the events file format this package
// reads and writes (the first line's "informerHostEvents").
const FormatVersion = 1

// Line types besides the event types add, update and delete.
const (
	LineSynced      = "synced"       // the binding's initial list is handled (ih_synced)
	LineCache       = "cache"        // an object of a cached resource, as the cache then had it
	LineCacheDelete = "cache-delete" // an object left a cached resource's cache
	// LineReconcile is one ih_reconcile call of a controller-mode
	// plugin (ABI.md section 18): the key, the primary as the cache held
	// it (absent: no object), the flags, and what the call gave the host.
	LineReconcile = "reconcile"
)

// Head is the first line of an events file.
type Head struct {
	// Version is FormatVersion.
	Version int `json:"informerHostEvents"`
	// Plugin is the file the stream was recorded for ("" if unknown).
	Plugin string `json:"plugin,omitempty"`
	// Resources names the resources the lines refer to by their config
	// name: the API coordinates the plugin sees in its event headers.
	Resources map[string]Resource `json:"resources"`
	// Cache lists the resources whose cache the recording carries: the
	// plugin's cache grants. cache_* on any other resource is denied.
	Cache []string `json:"cache,omitempty"`
}

// Resource is a configured resource's API coordinates.
type Resource struct {
	Group    string `json:"group,omitempty"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	Kind     string `json:"kind,omitempty"`
}

// Line is one line after the head: an event for the plugin (add, update,
// delete), a synced marker, or a change of the cache.
type Line struct {
	Type     string `json:"type"`
	Resource string `json:"resource"`
	// Object: the event's object, or the cache's object.
	Object map[string]any `json:"object,omitempty"`
	// OldObject: an update's previous state.
	OldObject map[string]any `json:"oldObject,omitempty"`
	// InitialList, FinalStateUnknown, SelfWrite and HandedOver are the
	// header flags (abi.Flag*) the plugin was given.
	InitialList       bool `json:"initialList,omitempty"`
	FinalStateUnknown bool `json:"finalStateUnknown,omitempty"`
	SelfWrite         bool `json:"selfWrite,omitempty"`
	HandedOver        bool `json:"handedOver,omitempty"`
	// MissedDelete is a delete's header flag missed delete
	// (abi.FlagMissedDelete): the host inferred it after the fact, and
	// the object is a stub; final state unknown goes with it.
	MissedDelete bool `json:"missedDelete,omitempty"`
	// Namespace and Name identify a cache-delete's object, or a
	// reconcile's key.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Deleting is a reconcile's header flag deleting (abi.FlagDeleting):
	// the primary has a deletionTimestamp. A reconcile without an object
	// is of an absent key (abi.FlagAbsent).
	Deleting bool `json:"deleting,omitempty"`
	// Children, Status and RequeueAfterMillis are what a reconcile gave
	// the host, for --compare: the body of its last children_apply call
	// (absent: it made none; [] is "no children"), of its last
	// status_apply call, and its requeue-after in milliseconds (the last
	// reconcile_requeue_after; absent or 0: none).
	Children           json.RawMessage `json:"children,omitempty"`
	Status             json.RawMessage `json:"status,omitempty"`
	RequeueAfterMillis int64           `json:"requeueAfterMillis,omitempty"`
	// Result is what the plugin answered in the recorded run (ok, retry,
	// drop, error, or a failure kind such as trap), for --compare.
	Result string `json:"result,omitempty"`

	// line is the line number in the file, for errors.
	line int
}

// Recording is a parsed events file.
type Recording struct {
	Head  Head
	Lines []Line
	refs  map[string]*event.ResourceRef
	file  string
}

// ReadFile parses an events file.
func ReadFile(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(path, f)
}

// Read parses an events file; name is its name in errors
// ("events.jsonl:3: ...").
func Read(name string, r io.Reader) (*Recording, error) {
	rec := &Recording{file: name, refs: map[string]*event.ResourceRef{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if rec.Head.Version == 0 {
			if err := strictJSON(b, &rec.Head); err != nil || rec.Head.Version == 0 {
				return nil, fmt.Errorf("%s:%d: the first line must be the head, {\"informerHostEvents\": %d, \"resources\": {...}}: %v",
					name, n, FormatVersion, err)
			}
			if rec.Head.Version != FormatVersion {
				return nil, fmt.Errorf("%s:%d: events file format v%d; this informer-host reads v%d (record the stream again with this version)",
					name, n, rec.Head.Version, FormatVersion)
			}
			for rn, res := range rec.Head.Resources {
				rec.refs[rn] = &event.ResourceRef{Name: rn, Group: res.Group, Version: res.Version, Resource: res.Resource, Kind: res.Kind}
			}
			continue
		}
		var l Line
		if err := strictJSON(b, &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		l.line = n
		if err := rec.check(&l); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		rec.Lines = append(rec.Lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	if rec.Head.Version == 0 {
		return nil, fmt.Errorf("%s: empty: no head line (record a stream with informer-host record)", name)
	}
	return rec, nil
}

// errTrailing is strictJSON's error for text after the value: a second
// value pasted in, or an edit gone wrong, which a reader stopping at the
// first value would silently leave out.
var errTrailing = errors.New("text after the JSON value")

// strictJSON decodes the one JSON value b holds into v, refusing unknown
// fields and anything but white space after the value (errTrailing).
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	var extra json.RawMessage
	switch err := d.Decode(&extra); {
	case err == io.EOF:
		return nil
	case err != nil:
		return fmt.Errorf("%w: %v", errTrailing, err)
	}
	return fmt.Errorf("%w: %.40s", errTrailing, extra)
}

func (rec *Recording) check(l *Line) error {
	if _, ok := rec.refs[l.Resource]; !ok {
		return fmt.Errorf("resource %q is not in the head's resources", l.Resource)
	}
	switch l.Type {
	case "add", "update", "delete", LineCache:
		if l.Object == nil {
			return fmt.Errorf("a %s line needs an object", l.Type)
		}
		if l.Type == "update" && l.OldObject == nil {
			return fmt.Errorf("an update line needs an oldObject")
		}
	case LineSynced:
	case LineReconcile:
		if l.Name == "" {
			return fmt.Errorf("a reconcile line needs the key's name")
		}
		if l.Deleting && l.Object == nil {
			return fmt.Errorf("a reconcile line with deleting needs the object (without one the key is absent)")
		}
		if l.RequeueAfterMillis < 0 || l.RequeueAfterMillis > abi.MaxRequeueAfterMillis {
			return fmt.Errorf("requeueAfterMillis %d: want 0 to %d", l.RequeueAfterMillis, abi.MaxRequeueAfterMillis)
		}
		if len(l.Children) > 0 && !jsonOpens(l.Children, '[') {
			return fmt.Errorf("children: want the JSON array children_apply was given")
		}
		if len(l.Status) > 0 && !jsonOpens(l.Status, '{') {
			return fmt.Errorf("status: want the JSON object status_apply was given")
		}
	case LineCacheDelete:
		if l.Name == "" {
			return fmt.Errorf("a cache-delete line needs a name")
		}
	default:
		return fmt.Errorf("unknown line type %q (want add, update, delete, synced, cache, cache-delete or reconcile)", l.Type)
	}
	if l.MissedDelete && l.Type != "delete" {
		return fmt.Errorf("missedDelete belongs to delete lines, not %s", l.Type)
	}
	if l.Type != LineReconcile && (l.Deleting || len(l.Children) > 0 || len(l.Status) > 0 || l.RequeueAfterMillis != 0) {
		return fmt.Errorf("deleting, children, status and requeueAfterMillis belong to reconcile lines, not %s", l.Type)
	}
	return nil
}

// jsonOpens reports whether b is valid JSON whose value opens with open.
func jsonOpens(b []byte, open byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == open && json.Valid(t)
}

// ReconcileFlags returns the header flags a reconcile line gave the
// plugin.
func (l *Line) ReconcileFlags() uint8 {
	var f uint8
	if l.InitialList {
		f |= abi.FlagInitialList
	}
	if l.Object == nil {
		f |= abi.FlagAbsent
	}
	if l.Deleting {
		f |= abi.FlagDeleting
	}
	return f
}

// ReconcileLine is the line of one ih_reconcile call of the key
// namespace/name of res: obj is the primary (nil: absent), flags the
// header flags (abi.FlagInitialList, abi.FlagDeleting; absent follows
// from obj), children and status the bodies of the call's last
// children_apply and status_apply (nil: none made), requeue its
// requeue-after, result what the plugin answered.
func ReconcileLine(res *event.ResourceRef, namespace, name string, obj *unstructured.Unstructured, flags uint8,
	children, status []byte, requeue time.Duration, result string) Line {
	l := Line{Type: LineReconcile, Resource: res.Name, Namespace: namespace, Name: name,
		InitialList: flags&abi.FlagInitialList != 0, Deleting: flags&abi.FlagDeleting != 0 && obj != nil,
		Children: canonical(children), Status: canonical(status), RequeueAfterMillis: requeue.Milliseconds(), Result: result}
	if obj != nil {
		l.Object = obj.Object
	}
	return l
}

// Event returns the informer event of an add, update or delete line.
func (rec *Recording) Event(l *Line) *event.Event {
	ev := &event.Event{Resource: rec.refs[l.Resource], IsInInitialList: l.InitialList, FinalStateUnknown: l.FinalStateUnknown,
		HandedOver: l.HandedOver, Object: &unstructured.Unstructured{Object: l.Object}}
	switch l.Type {
	case "add":
		ev.Type = event.EventAdd
	case "update":
		ev.Type = event.EventUpdate
		ev.OldObject = &unstructured.Unstructured{Object: l.OldObject}
	case "delete":
		ev.Type = event.EventDelete
	}
	return ev
}

// PluginFlags returns the header flags of an event line that are the
// plugin's alone (abi.FlagSelfWrite, abi.FlagMissedDelete with
// abi.FlagFinalStateUnknown), which the event does not carry.
func (l *Line) PluginFlags() uint8 {
	var f uint8
	if l.SelfWrite {
		f |= abi.FlagSelfWrite
	}
	if l.MissedDelete {
		f |= abi.FlagMissedDelete | abi.FlagFinalStateUnknown
	}
	return f
}

// Ref returns the resource a line names.
func (rec *Recording) Ref(l *Line) *event.ResourceRef { return rec.refs[l.Resource] }

// Writer writes an events file. It is not safe for concurrent use.
type Writer struct {
	w    *bufio.Writer
	head bool
}

// NewWriter returns a Writer on w; call Head first.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

// Head writes the head line.
func (w *Writer) Head(h Head) error {
	h.Version = FormatVersion
	w.head = true
	return w.put(h)
}

// Line writes one line.
func (w *Writer) Line(l Line) error {
	if !w.head {
		return fmt.Errorf("replay: Line before Head")
	}
	return w.put(l)
}

// EventLine is the line of ev given to a plugin with the header flags
// that are its alone (pluginFlags: abi.FlagSelfWrite, and
// abi.FlagMissedDelete with abi.FlagFinalStateUnknown), with the
// recorded result.
func EventLine(ev *event.Event, pluginFlags uint8, result string) Line {
	missed := ev.Type == event.EventDelete && pluginFlags&abi.FlagMissedDelete != 0
	l := Line{Type: ev.Type.String(), Resource: ev.Resource.Name, InitialList: ev.IsInInitialList,
		FinalStateUnknown: ev.FinalStateUnknown || missed, SelfWrite: pluginFlags&abi.FlagSelfWrite != 0, HandedOver: ev.HandedOver,
		MissedDelete: missed, Result: result}
	if ev.Object != nil {
		l.Object = ev.Object.Object
	}
	if ev.OldObject != nil {
		l.OldObject = ev.OldObject.Object
	}
	return l
}

// ResourceOf is the head entry of ref.
func ResourceOf(ref *event.ResourceRef) Resource {
	return Resource{Group: ref.Group, Version: ref.Version, Resource: ref.Resource, Kind: ref.Kind}
}

func (w *Writer) put(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.w.Write(b)
	return err
}

// Flush writes what is buffered.
func (w *Writer) Flush() error { return w.w.Flush() }
