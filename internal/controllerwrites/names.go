package controllerwrites

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxPluginLabel keeps AnnotationRequeuePrefix's name part
// ("requeue-at." + the label) within a qualified name's 63 characters.
const maxPluginLabel = 63 - len("requeue-at.")

// PluginLabel is the plugin's name as a DNS label short enough to follow
// "requeue-at." in an annotation's name: the value of LabelPlugin and
// the suffix of the requeue annotation. Lower case; any other character
// than a-z, 0-9 and '-' becomes '-' ("copy.wasm" → "copy-wasm"); a name
// too long keeps its start and gains a hash of the whole, so two long
// names never share a label.
func PluginLabel(plugin string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(plugin) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "plugin"
	}
	if len(s) > maxPluginLabel {
		sum := sha256.Sum256([]byte(plugin))
		s = strings.TrimRight(s[:maxPluginLabel-9], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return s
}

// RequeueAnnotation is the annotation that holds the plugin's due time
// on a primary.
func RequeueAnnotation(plugin string) string { return AnnotationRequeuePrefix + PluginLabel(plugin) }

// Owner is the parsed AnnotationOwner: which primary a child was applied
// for. Resource is the primary's group and resource (no version: the
// annotation outlives an API version change).
type Owner struct {
	Resource             schema.GroupResource
	Namespace, Name, UID string
}

// ParseOwner parses an AnnotationOwner value.
func ParseOwner(s string) (Owner, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[0] == "" || parts[2] == "" {
		return Owner{}, false
	}
	return Owner{Resource: schema.ParseGroupResource(parts[0]), Namespace: parts[1], Name: parts[2], UID: parts[3]}, true
}

// String is the annotation's value: "<resource.group>/<ns>/<name>/<uid>"
// ("configmaps/src/a/…", "cronjobs.batch.example.com/ns/c/…", and an
// empty namespace for a cluster-scoped primary).
func (o Owner) String() string { return o.IndexKey() + "/" + o.UID }

// IndexKey is the owner without its uid, the key an OwnedLister is asked
// for and OwnerIndexFunc indexes by: "<resource.group>/<ns>/<name>". The
// uid is left out so a recreated primary finds its predecessor's
// children (stale, to be pruned).
func (o Owner) IndexKey() string {
	return o.Resource.String() + "/" + o.Namespace + "/" + o.Name
}

// OwnerIndex is the name of the informer index OwnerIndexFunc computes.
const OwnerIndex = "controller.informer-host.io/owner"

// OwnerIndexFunc is a cache.IndexFunc: an object's AnnotationOwner's
// IndexKey, so an OwnedLister answers from the indexer instead of a
// whole list per reconcile.
func OwnerIndexFunc(obj any) ([]string, error) {
	m, ok := obj.(interface{ GetAnnotations() map[string]string })
	if !ok {
		return nil, nil
	}
	o, ok := ParseOwner(m.GetAnnotations()[AnnotationOwner])
	if !ok {
		return nil, nil
	}
	return []string{o.IndexKey()}, nil
}
