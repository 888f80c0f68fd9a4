package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the plugin resources.
const (
	Group   = "informer-host.io"
	Version = "v1alpha1"
)

// Kinds and resources.
const (
	KindPlugin        = "Plugin"
	KindClusterPlugin = "ClusterPlugin"
)

var (
	// PluginsGVR and ClusterPluginsGVR are the resources the daemon
	// watches.
	PluginsGVR        = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "plugins"}
	ClusterPluginsGVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "clusterplugins"}
)

// PluginName is the host's name of a plugin object's plugin (what
// /debug/plugins, metrics and logs call it): "<name>.wasm" for a
// ClusterPlugin, "<namespace>.<name>.wasm" for a Plugin. Object names of
// both kinds are DNS labels (no dots; the CRDs' validation), so the two
// never collide; a config.yaml module of the same name wins, and the
// object is refused with a condition saying so.
func PluginName(namespace, name string) string {
	if namespace == "" {
		return name + ".wasm"
	}
	return namespace + "." + name + ".wasm"
}

// Plugin is a team's plugin in its own namespace.
type Plugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PluginSpec   `json:"spec"`
	Status            PluginStatus `json:"status,omitempty"`
}

// ClusterPlugin is the operator's plugin, cluster-scoped.
type ClusterPlugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PluginSpec   `json:"spec"`
	Status            PluginStatus `json:"status,omitempty"`
}

// PluginSpec is what a plugin object asks for. Beside Source, Verify and
// ServiceAccountName, its fields are those of a plugins.modules entry
// (README, "Configuration"), read by config.ParseModule: Settings holds
// them as written, so the daemon, not this type, decides what they mean,
// and a field config.yaml gains is one a resource gains.
type PluginSpec struct {
	// Source is where the module's bytes come from.
	Source Source `json:"source"`
	// Verify is the signature policy; keys are inline PEM.
	Verify *Verify `json:"verify,omitempty"`
	// ServiceAccountName is the ServiceAccount of the Plugin's namespace
	// whose identity its writes, Events and ConfigMap source reads are
	// made as (impersonated). Required for a Plugin; a ClusterPlugin
	// uses grants.impersonate as config.yaml does.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Settings: bindings, delivery, limits, config, grants, controller,
	// as in a plugins.modules entry.
	Settings json.RawMessage `json:"-"`
}

// Source is one of OCI, HTTPS and ConfigMap, with a config.yaml source's
// pull settings.
type Source struct {
	// OCI is "registry/repository:tag" or "registry/repository@sha256:…".
	OCI string `json:"oci,omitempty"`
	// HTTPS is an https:// URL; SHA256 is then required.
	HTTPS string `json:"https,omitempty"`
	// ConfigMap holds the module in a binaryData key (modules under the
	// 1 MiB object limit: C, Rust, AssemblyScript).
	ConfigMap *ConfigMapSource `json:"configMap,omitempty"`
	// File is a file:// path on the daemon's disk: ClusterPlugin only.
	File string `json:"file,omitempty"`
	// SHA256, PullPolicy, RefreshInterval and FailurePolicy mean what
	// plugins.modules[] fields of these names do.
	SHA256          string `json:"sha256,omitempty"`
	PullPolicy      string `json:"pullPolicy,omitempty"`
	RefreshInterval string `json:"refreshInterval,omitempty"`
	FailurePolicy   string `json:"failurePolicy,omitempty"`
}

// ConfigMapSource names a ConfigMap key holding a module.
type ConfigMapSource struct {
	// Namespace: a Plugin's own (the only one allowed); required for a
	// ClusterPlugin.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// Verify is a plugin object's signature policy.
type Verify struct {
	Required bool `json:"required,omitempty"`
	// PublicKeys are PEM public keys, any of which may have signed.
	PublicKeys []string `json:"publicKeys,omitempty"`
	// Identities are keyless signers, checked against
	// pluginResources.trustedRoot.
	Identities []Identity `json:"identities,omitempty"`
}

// Identity is one keyless signer.
type Identity struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// Condition types of a plugin object's status.
const (
	// ConditionReady: the version the spec asks for runs, has synced,
	// and is neither degraded nor quarantined, on every replica that
	// runs it. A plugin that fails is never Ready.
	ConditionReady = "Ready"
	// ConditionVerified: the running version's signature verified under
	// the spec's policy (Unknown without one).
	ConditionVerified = "Verified"
	// ConditionSynced: the plugin has handled the initial list of every
	// binding.
	ConditionSynced = "Synced"
	// ConditionDegraded: something is wrong that the plugin survives: a
	// refused new version (the old one runs), a source that cannot be
	// reached, a buffer overflow being repaired, parked objects.
	ConditionDegraded = "Degraded"
	// ConditionQuarantined: the plugin failed too often and is stopped
	// until it changes.
	ConditionQuarantined = "Quarantined"
)

// Reasons of the conditions (CamelCase, as Kubernetes reasons are).
const (
	ReasonRunning          = "Running"
	ReasonLoading          = "Loading"
	ReasonRefused          = "Refused"      // the spec is invalid or over the ceiling: nothing runs
	ReasonOverCeiling      = "OverCeiling"  // a tenant's request exceeds its namespace's ceiling
	ReasonNameConflict     = "NameConflict" // config.yaml or the directory has a plugin of this name
	ReasonNotAllowed       = "NamespaceNotAllowed"
	ReasonForbidden        = "Forbidden"    // the plugin's ServiceAccount may not do what its spec asks, by its own RBAC
	ReasonLoadFailed       = "LoadFailed"   // the version asked for does not load
	ReasonSourceFailed     = "SourceFailed" // the source cannot be fetched
	ReasonNotVerified      = "NotVerified"  // its signature does not verify
	ReasonVerified         = "Verified"
	ReasonNoPolicy         = "NoPolicy"
	ReasonQuarantined      = "Quarantined"
	ReasonNotQuarantined   = "NotQuarantined"
	ReasonSyncing          = "Syncing"
	ReasonSynced           = "Synced"
	ReasonObjectsParked    = "ObjectsParked"
	ReasonBufferOverflowed = "BufferOverflowed"
	ReasonHealthy          = "Healthy"
	ReasonStandby          = "Standby"
)

// PluginStatus is what the replicas running the plugin report.
type PluginStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// Source is the source as shown (credentials redacted).
	Source string `json:"source,omitempty"`
	// Digest is the running version's sha256 ("" while none runs).
	Digest string `json:"digest,omitempty"`
	// Signer is who signed the running version, when it verified.
	Signer string `json:"signer,omitempty"`
	// EventsDelivered counts the events handed to the plugin, every
	// replica together (as last reported by each).
	EventsDelivered int64 `json:"eventsDelivered,omitempty"`
	// Parked counts the objects parked, every replica together.
	Parked int64 `json:"parked,omitempty"`
	// LastFailure is the most recent failure any replica reported.
	LastFailure *Failure `json:"lastFailure,omitempty"`
	// Replicas are each running replica's own report: one entry with
	// leader election, one per member with sharding.
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// ReplicaStatus is one replica's share of a plugin object's status.
type ReplicaStatus struct {
	// Name is the replica's identity (its Lease holder or shard member).
	Name            string      `json:"name"`
	Digest          string      `json:"digest,omitempty"`
	State           string      `json:"state,omitempty"` // host.PluginState
	Ready           bool        `json:"ready"`
	Synced          bool        `json:"synced"`
	Degraded        bool        `json:"degraded,omitempty"`
	EventsDelivered int64       `json:"eventsDelivered,omitempty"`
	Parked          int64       `json:"parked,omitempty"`
	LastFailure     *Failure    `json:"lastFailure,omitempty"`
	ReportedAt      metav1.Time `json:"reportedAt"`
}

// Failure is one failure as a person reads it.
type Failure struct {
	Time    metav1.Time `json:"time"`
	Message string      `json:"message"`
}
