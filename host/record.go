package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/replay"
	"github.com/informer-host/informer-host/informer"
)

// Recorder writes, for each plugin, the event stream it receives in a
// host, after its filters and the host's delivery rules, as an events file
// (abi/REPLAY.md) that informer-host replay feeds to the plugin again:
// every ih_handle call's event with the result the plugin gave, every
// ih_synced, and the changes of the caches the plugin may read, in the
// order they happened. A delivery repeated because the plugin said retry
// is written once (the replay retries it itself).
//
// Cache lines are written as the informer hands the change to its
// listeners, event lines as the plugin's call returns: a cache change
// that lands while a call runs is written before that call's event, so
// a plugin whose reads race the informer may read in the replay a cache
// a little newer than it read live.
type Recorder struct {
	// Resource, when set, records the events of that resource only
	// (cache lines are kept: the plugin's reads need them).
	Resource string

	mu      sync.Mutex
	streams map[string]*recStream // by plugin file name
	regs    []*informer.Registration
}

type recStream struct {
	head    replay.Head
	lines   []replay.Line
	pending map[string]bool // events answered retry, not yet answered otherwise
}

func (r *Recorder) stream(plugin string) *recStream {
	if r.streams == nil {
		r.streams = map[string]*recStream{}
	}
	s := r.streams[plugin]
	if s == nil {
		s = &recStream{head: replay.Head{Plugin: plugin, Resources: map[string]replay.Resource{}}, pending: map[string]bool{}}
		r.streams[plugin] = s
	}
	return s
}

func (s *recStream) ref(ref *informer.ResourceRef) {
	if ref != nil {
		s.head.Resources[ref.Name] = replay.ResourceOf(ref)
	}
}

// observe is the host's observe hook.
func (r *Recorder) observe(plugin string, ev *informer.Event, res engine.Result, err error) {
	if r.Resource != "" && ev.Resource != nil && ev.Resource.Name != r.Resource {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stream(plugin)
	s.ref(ev.Resource)
	if ev.Object == nil {
		s.lines = append(s.lines, replay.Line{Type: replay.LineSynced, Resource: ev.Resource.Name})
		return
	}
	result := res.Code.String()
	if err != nil {
		result = "error"
		var f *engine.Failure
		if errors.As(err, &f) {
			result = f.Kind.String()
		}
	}
	k := ev.Type.String() + " " + ev.Resource.Name + " " + ev.Key() + " " + ev.Object.GetResourceVersion()
	if s.pending[k] {
		if err != nil || res.Code != engine.CodeRetry {
			delete(s.pending, k)
		}
		return
	}
	if err == nil && res.Code == engine.CodeRetry {
		s.pending[k] = true
	}
	s.lines = append(s.lines, replay.EventLine(ev, result))
}

// recCache records the changes of one cached resource into one plugin's
// stream.
type recCache struct {
	r      *Recorder
	plugin string
}

func (c recCache) put(res *informer.ResourceRef, l replay.Line) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	s := c.r.stream(c.plugin)
	s.ref(res)
	s.lines = append(s.lines, l)
}

func (c recCache) OnAdd(res *informer.ResourceRef, obj *unstructured.Unstructured, _ bool) {
	c.put(res, replay.Line{Type: replay.LineCache, Resource: res.Name, Object: obj.Object})
}

func (c recCache) OnUpdate(res *informer.ResourceRef, _, obj *unstructured.Unstructured) {
	c.put(res, replay.Line{Type: replay.LineCache, Resource: res.Name, Object: obj.Object})
}

func (c recCache) OnDelete(res *informer.ResourceRef, obj *unstructured.Unstructured, _ bool) {
	c.put(res, replay.Line{Type: replay.LineCacheDelete, Resource: res.Name, Namespace: obj.GetNamespace(), Name: obj.GetName()})
}

// NewRecording returns a host whose plugins' event streams r records.
// Call Watch(plugin) for each plugin file before LoadDir, so that the
// caches it may read are recorded from their first object.
func NewRecording(ctx context.Context, opts Options, r *Recorder) (*Host, error) {
	opts.observe = r.observe
	return New(ctx, opts)
}

// Watch starts recording, for plugin (a file name in the plugin
// directory), the caches its settings grant it.
func (r *Recorder) Watch(h *Host, plugin string) error {
	s := h.config().SettingsFor(plugin)
	r.mu.Lock()
	st := r.stream(plugin)
	for _, g := range s.Grants.Cache {
		st.head.Cache = append(st.head.Cache, g.Resource)
	}
	r.mu.Unlock()
	for _, g := range s.Grants.Cache {
		reg, err := h.pipeline.AddListener(g.Resource, recCache{r: r, plugin: plugin})
		if err != nil {
			return fmt.Errorf("record the cache of %q for %s: %w", g.Resource, plugin, err)
		}
		r.mu.Lock()
		r.regs = append(r.regs, reg)
		r.mu.Unlock()
	}
	return nil
}

// Plugins returns the plugins with a stream.
func (r *Recorder) Plugins() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p := range r.streams {
		out = append(out, p)
	}
	return out
}

// Stop ends the cache recording; call it after the host stopped.
func (r *Recorder) Stop() {
	r.mu.Lock()
	regs := r.regs
	r.regs = nil
	r.mu.Unlock()
	for _, reg := range regs {
		reg.Remove()
	}
}

// Write writes plugin's stream as an events file.
func (r *Recorder) Write(plugin string, w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stream(plugin)
	rw := replay.NewWriter(w)
	if err := rw.Head(s.head); err != nil {
		return err
	}
	for _, l := range s.lines {
		if err := rw.Line(l); err != nil {
			return err
		}
	}
	return rw.Flush()
}
