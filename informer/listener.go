package informer

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/event"
)

// Listener receives the notifications of one configured resource. Calls
// for one listener are sequential and ordered; calls for different
// listeners run concurrently. Objects are the informer cache's own and must
// not be modified.
//
// A listener must not block for long: client-go buffers a slow listener's
// notifications without bound. Listeners that do real work (plugins) should
// hand the notification to a bounded queue of their own and return.
type Listener interface {
	OnAdd(res *event.ResourceRef, obj *unstructured.Unstructured, isInInitialList bool)
	OnUpdate(res *event.ResourceRef, oldObj, newObj *unstructured.Unstructured)
	OnDelete(res *event.ResourceRef, obj *unstructured.Unstructured, finalStateUnknown bool)
}

// ListenerFunc adapts a function over events to a Listener.
type ListenerFunc func(ev *event.Event)

func (f ListenerFunc) OnAdd(res *event.ResourceRef, obj *unstructured.Unstructured, isInInitialList bool) {
	f(&event.Event{Type: event.EventAdd, Resource: res, Object: obj, IsInInitialList: isInInitialList})
}

func (f ListenerFunc) OnUpdate(res *event.ResourceRef, oldObj, newObj *unstructured.Unstructured) {
	f(&event.Event{Type: event.EventUpdate, Resource: res, Object: newObj, OldObject: oldObj})
}

func (f ListenerFunc) OnDelete(res *event.ResourceRef, obj *unstructured.Unstructured, finalStateUnknown bool) {
	f(&event.Event{Type: event.EventDelete, Resource: res, Object: obj, FinalStateUnknown: finalStateUnknown})
}

// handlerAdapter is the cache.ResourceEventHandler client-go calls; it
// turns untyped notifications into Listener calls for one resource.
type handlerAdapter struct {
	res *event.ResourceRef
	l   Listener
}

func (h handlerAdapter) OnAdd(obj any, isInInitialList bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		h.l.OnAdd(h.res, u, isInInitialList)
	}
}

func (h handlerAdapter) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if ok1 && ok2 {
		h.l.OnUpdate(h.res, o, n)
	}
}

func (h handlerAdapter) OnDelete(obj any) {
	switch t := obj.(type) {
	case *unstructured.Unstructured:
		h.l.OnDelete(h.res, t, false)
	case cache.DeletedFinalStateUnknown:
		// The watch missed the delete and a relist found the object gone.
		// t.Obj is the last state the cache held; it can be stale.
		if u, ok := t.Obj.(*unstructured.Unstructured); ok {
			h.l.OnDelete(h.res, u, true)
		}
	}
}
