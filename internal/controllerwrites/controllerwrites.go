package controllerwrites

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// The host's bookkeeping on the objects it writes for a controller.
const (
	// LabelPlugin marks a child the host applied, with the value
	// PluginLabel(plugin): the informer caches select a plugin's children
	// by it.
	LabelPlugin = "controller.informer-host.io/plugin"
	// AnnotationOwner names a child's primary,
	// "<resource.group>/<namespace>/<name>/<uid>" (see Owner): the one
	// link that also works across namespaces, where an ownerReference
	// cannot.
	AnnotationOwner = "controller.informer-host.io/owner"
	// AnnotationRequeuePrefix + PluginLabel(plugin) holds, on a primary,
	// the RFC 3339 time the plugin asked to reconcile it again.
	AnnotationRequeuePrefix = "controller.informer-host.io/requeue-at."
)

// Resource is a configured resource the host writes: the primary (for)
// or an owned one (owns).
type Resource struct {
	Name       string // its name in config.yaml resources (kubewrite's Request.Resource)
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// Key is a primary's key; Namespace is empty for a cluster-scoped one.
type Key struct{ Namespace, Name string }

// Writes is what kubewrite.Writer gives a plugin: the grant check and
// the write itself, with the plugin's identity, budget, timeout, dry run,
// metrics and ABI codes.
type Writes interface {
	Check(r *kubewrite.Request) (int32, string)
	Do(ctx context.Context, r *kubewrite.Request) (map[string]any, int32, string)
}

// OwnedLister reads the owned resources' informer caches.
type OwnedLister interface {
	// ListOwned returns the cached objects of the owned resource (its
	// Resource.Name) whose AnnotationOwner names the primary owner (an
	// OwnerIndexKey). An implementation may return more (a whole list):
	// the Writer filters again by label and annotation.
	ListOwned(resource, owner string) []*unstructured.Unstructured
}

// Options configure a Writer.
type Options struct {
	Plugin  string            // the module's name, as kubewrite's PluginOptions.Plugin
	Writes  Writes            // the plugin's kubewrite.Writer. Required.
	Client  dynamic.Interface // reads with the plugin's identity (kubewrite.Writer.Dynamic); fresh copies on conflicts
	Primary Resource          // the for resource
	Owns    []Resource        // the owned resources; a child must be of one of them
	Owned   OwnedLister
	// Finalizer is the managed finalizer; "" for none.
	Finalizer string
	Now       func() time.Time // default time.Now
}

// Writer performs one controller plugin's writes. Between calls it keeps
// only what it last applied to each child (appliedSet), to skip applies
// that would change nothing; its methods may run concurrently for
// different keys.
type Writer struct {
	o       Options
	applied appliedSet
}

// New returns a Writer.
func New(o Options) *Writer { return &Writer{o: o} }

// ChildFailure is one child that could not be applied or pruned.
type ChildFailure struct {
	Kind, Namespace, Name string
	Err                   error
	Code                  int32 // the ABI code of Err (abi.Err*)
}

// Error is a failure with its ABI code.
type Error struct {
	Code int32
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Code returns err's ABI code: 0 for nil, an *Error's code, ERR_CANCELED
// for a canceled context, ERR_TIMEOUT for an expired one, else
// ERR_UNAVAILABLE.
func Code(err error) int32 {
	var e *Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.Canceled):
		return abi.ErrCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return abi.ErrTimeout
	}
	return abi.ErrUnavailable
}

func (w *Writer) now() time.Time {
	if w.o.Now != nil {
		return w.o.Now()
	}
	return time.Now()
}

// primaryGR is how the owner annotation names the primary's resource.
func (w *Writer) primaryGR() schema.GroupResource { return w.o.Primary.GVR.GroupResource() }

var _ Writes = (*kubewrite.Writer)(nil)
