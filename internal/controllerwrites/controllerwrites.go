package controllerwrites

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

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

// Writer performs one controller plugin's writes. It keeps no state
// between calls; its methods may run concurrently for different keys.
type Writer struct{ o Options }

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
// for a canceled context, else ERR_UNAVAILABLE.
func Code(err error) int32 { panic("not yet") }

// ApplyChildren applies the desired children (a JSON array) of the
// primary key and prunes the ones applied before that are not among
// them. primary is nil when the key is absent: then children must be
// empty, and every child applied for the key goes. Per-child failures
// come back in failed, never stopping the other children; err is for the
// call as a whole (invalid JSON, a child of a resource not owned), when
// nothing was written.
func (w *Writer) ApplyChildren(ctx context.Context, key Key, primary *unstructured.Unstructured, children []byte) (failed []ChildFailure, err error) {
	return nil, errors.New("not yet")
}

// PruneAll deletes every child applied for the key: its primary is gone.
func (w *Writer) PruneAll(ctx context.Context, key Key) ([]ChildFailure, error) {
	return nil, errors.New("not yet")
}

// ApplyStatus server-side applies status (a JSON object) to the
// primary's status subresource.
func (w *Writer) ApplyStatus(ctx context.Context, primary *unstructured.Unstructured, status []byte) error {
	return errors.New("not yet")
}

// EnsureFinalizer adds the managed finalizer unless the primary has it
// or is being deleted.
func (w *Writer) EnsureFinalizer(ctx context.Context, primary *unstructured.Unstructured) (added bool, err error) {
	return false, errors.New("not yet")
}

// RemoveFinalizer removes the managed finalizer, and only it.
func (w *Writer) RemoveFinalizer(ctx context.Context, primary *unstructured.Unstructured) error {
	return errors.New("not yet")
}

// PersistRequeue records the primary's due time (zero clears it).
func (w *Writer) PersistRequeue(ctx context.Context, primary *unstructured.Unstructured, due time.Time) error {
	return errors.New("not yet")
}

// RequeueAt reads back the due time PersistRequeue recorded.
func RequeueAt(obj *unstructured.Unstructured, plugin string) (time.Time, bool) {
	return time.Time{}, false
}

// OnlyHostMetadataChanged reports whether old and new differ only in the
// host's bookkeeping for the plugin: its requeue annotation, its
// finalizer (finalizer; "" for none), managedFields and resourceVersion.
func OnlyHostMetadataChanged(old, new *unstructured.Unstructured, plugin, finalizer string) bool {
	return false
}

// Release removes finalizer from every object of gvr (only those being
// deleted when onlyDeleting) and returns how many it released.
func Release(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, finalizer string, onlyDeleting bool) (released int, err error) {
	return 0, errors.New("not yet")
}

// PluginLabel is the plugin's name as a DNS label that also fits the
// requeue annotation's name: the value of LabelPlugin.
func PluginLabel(plugin string) string { return plugin }

// Owner is the parsed AnnotationOwner.
type Owner struct {
	Resource             schema.GroupResource
	Namespace, Name, UID string
}

// ParseOwner parses an AnnotationOwner value.
func ParseOwner(s string) (Owner, bool) { return Owner{}, false }

// String is the annotation's value.
func (o Owner) String() string { return "" }

// IndexKey is the owner without its uid, the key OwnedLister is asked
// for and OwnerIndexFunc indexes by: "<resource.group>/<ns>/<name>".
func (o Owner) IndexKey() string { return "" }

// OwnerIndex is the name of the informer index OwnerIndexFunc computes.
const OwnerIndex = "controller.informer-host.io/owner"

// OwnerIndexFunc is a cache.IndexFunc: an object's AnnotationOwner's
// IndexKey, so an OwnedLister can answer from the indexer.
func OwnerIndexFunc(obj any) ([]string, error) { return nil, nil }

var _ Writes = (*kubewrite.Writer)(nil)
