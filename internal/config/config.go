package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/informer-host/informer-host/internal/filter"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// APIVersion is the only schema this package reads. A file must name it so
// that a future v2 can change meanings without silently misreading v1 files.
const APIVersion = "informer-host/v1"

// Event types a binding may ask for.
const (
	EventAdd    = "add"
	EventUpdate = "update"
	EventDelete = "delete"
)

// Delivery modes.
const (
	// DeliveryEvery hands the plugin every event, in order.
	DeliveryEvery = "every"
	// DeliveryLatest lets newer events for an object replace ones the
	// plugin has not taken yet, for plugins that only care about the
	// current state.
	DeliveryLatest = "latest"
)

// What a handler's ERROR answer does (delivery.onError).
const (
	// OnErrorRetry retries the object with backoff, as a controller's
	// reconcile error does.
	OnErrorRetry = "retry"
	// OnErrorSkip gives up on the event: the object waits for its next
	// change.
	OnErrorSkip = "skip"
)

// What the host does with deletes a plugin missed (delivery.missedDeletes).
const (
	MissedDeletesDeliver = "deliver"
	MissedDeletesSkip    = "skip"
)

// UnlimitedRetries as Delivery.MaxRetries never gives up on an object.
const UnlimitedRetries = -1

// ServerOff as server.address disables the HTTP server.
const ServerOff = "off"

// Built-in defaults, filled in by Load and Parse for fields the file leaves
// out (or sets to null).
const (
	DefaultPluginDirectory = "plugins"
	DefaultServerAddress   = ":9090"
	DefaultLeaseName       = "informer-host"
	DefaultLeaseDuration   = 15 * time.Second
	DefaultRenewDeadline   = 10 * time.Second
	DefaultRetryPeriod     = 2 * time.Second
	DefaultDeliveryMode    = DeliveryEvery
	DefaultBufferSize      = 10000
	// DefaultMaxRetries: an object whose handling fails is retried until
	// it succeeds, as client-go's workqueue retries it; giving up is an
	// explicit opt-in (delivery.maxRetries).
	DefaultMaxRetries = UnlimitedRetries
	// DefaultRetryBackoff and DefaultMaxRetryBackoff are client-go's
	// DefaultControllerRateLimiter's per-object bounds.
	DefaultRetryBackoff    = 5 * time.Millisecond
	DefaultMaxRetryBackoff = 1000 * time.Second
	DefaultOnError         = OnErrorRetry
	DefaultMissedDeletes   = MissedDeletesDeliver
	// DefaultParkAfter failures of calls handling one object park it.
	DefaultParkAfter = 3
	// DefaultStablePeriod without a failure ends a plugin's failure
	// streak, as a container's restart backoff resets after it ran 10
	// minutes without crashing.
	DefaultStablePeriod           = 10 * time.Minute
	DefaultMemoryPages            = 1024 // 64 MiB
	DefaultCallTimeout            = time.Second
	DefaultMaxConsecutiveFailures = 5
	DefaultRestartBackoff         = time.Second
	DefaultMaxRestartBackoff      = time.Minute
	// DefaultMaxModuleSize is far above any real plugin (the Go examples,
	// runtime included, are under 4 MB) and far below what would hurt:
	// a module is held in memory whole while it compiles.
	DefaultMaxModuleSize Size = 64 << 20
	// DefaultFetchTimeout notices a stalled registry within a minute and
	// still lets a module of DefaultMaxModuleSize arrive over a link of
	// about 1 MiB/s (ociartifact.DefaultTimeout).
	DefaultFetchTimeout = time.Minute
)

// Bounds that validation enforces. They exist to catch typos (an extra
// zero) before they become an out-of-memory kill at run time.
const (
	MaxBufferSize  = 1_000_000
	MaxMaxRetries  = 100
	MaxParkAfter   = 100
	MaxMemoryPages = 65536 // the wasm32 limit: 4 GiB
	MaxModuleSize  = Size(1 << 30)
	// MaxHostCallsPerCall bounds limits.maxHostCallsPerCall.
	MaxHostCallsPerCall = 1 << 30
)

// serviceAccountNamespaceFile is where a pod learns its own namespace; the
// lease lives there unless the file says otherwise.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Config is a parsed, validated config file with defaults applied.
type Config struct {
	APIVersion     string         `yaml:"apiVersion" json:"apiVersion"` // required, must equal APIVersion
	Kubeconfig     string         `yaml:"kubeconfig" json:"kubeconfig"` // empty: in-cluster, then $KUBECONFIG, then ~/.kube/config
	Resources      []Resource     `yaml:"resources" json:"resources"`
	Plugins        Plugins        `yaml:"plugins" json:"plugins"`
	Server         Server         `yaml:"server" json:"server"`
	LeaderElection LeaderElection `yaml:"leaderElection" json:"leaderElection"`
	// Sharding spreads the objects over every replica (sharding.go).
	Sharding Sharding `yaml:"sharding" json:"sharding"`
	// Upstreams are the HTTP endpoints plugins may be granted (grants.http).
	Upstreams []Upstream `yaml:"upstreams" json:"upstreams,omitempty"`
	// PluginResources, Tenancy and Tracing run the daemon the Kubernetes
	// way (kubenative.go).
	PluginResources PluginResources `yaml:"pluginResources" json:"pluginResources"`
	Tenancy         Tenancy         `yaml:"tenancy" json:"tenancy"`
	Tracing         Tracing         `yaml:"tracing" json:"tracing"`
	// File is the path the config was read from ("" when parsed from bytes
	// without a name); Dir() is its directory, against which relative
	// paths are resolved.
	File string `yaml:"-" json:"-"`

	// resolved is set once Load or Parse has merged every module over
	// plugins.default. From then on a module's fields hold effective
	// values, and a zero (maxRetries: 0) is a choice, not a gap to fill.
	resolved bool
	// lines holds the line of every resources[] and plugins.modules[]
	// entry, by path, for the problems found after Load: a module file
	// missing from the directory, a resource the apiserver does not serve
	// (locate.go). Set by Parse, never changed.
	lines map[string]int
}

// Resource is one watched API resource. Exactly one of Resource and Kind
// names it; Kind is resolved through discovery when the informer starts,
// so a CRD that is not installed yet is not a config error.
type Resource struct {
	Name               string   `yaml:"name" json:"name"`                       // required, unique; what bindings refer to
	Group              string   `yaml:"group" json:"group,omitempty"`           // "" = core
	Version            string   `yaml:"version" json:"version"`                 // required
	Resource           string   `yaml:"resource" json:"resource,omitempty"`     // plural lower-case resource, e.g. "pods"; exactly one of Resource/Kind
	Kind               string   `yaml:"kind" json:"kind,omitempty"`             // e.g. "Pod", resolved through discovery at run time
	Namespaces         []string `yaml:"namespaces" json:"namespaces,omitempty"` // none = all namespaces (and cluster-scoped resources)
	LabelSelector      string   `yaml:"labelSelector" json:"labelSelector,omitempty"`
	FieldSelector      string   `yaml:"fieldSelector" json:"fieldSelector,omitempty"`
	ResyncPeriod       Duration `yaml:"resyncPeriod" json:"resyncPeriod"`                       // 0 = no resync
	StripManagedFields *bool    `yaml:"stripManagedFields" json:"stripManagedFields,omitempty"` // nil = true; use StripsManagedFields()

	// Indexes are the indexes (IndexOwner) the informers of this resource
	// carry beyond namespace. Not read from the file: Load derives them
	// from the cache grants (ResolveIndexes), so an index exists only when
	// a plugin is granted it. client-go cannot add an indexer to a running
	// informer, so a change here restarts the resource's informers.
	Indexes []string `yaml:"-" json:"indexes,omitempty"`
}

// StripsManagedFields reports whether metadata.managedFields is dropped
// before objects reach the cache. It defaults to true because managed
// fields are often the bulk of an object and plugins rarely want them.
func (r *Resource) StripsManagedFields() bool {
	return r.StripManagedFields == nil || *r.StripManagedFields
}

// GroupVersion returns the resource's API group and version.
func (r *Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// Plugins says where plugins come from and how they are run.
type Plugins struct {
	Directory        string `yaml:"directory" json:"directory"`               // where *.wasm modules are dropped; relative to the config file's directory; default "plugins"
	CompilationCache string `yaml:"compilationCache" json:"compilationCache"` // on-disk wazero compilation cache; "" = os.UserCacheDir()/informer-host/wazero
	// MaxModuleSize is the largest *.wasm file that is read; a bigger one
	// is refused unread. Default 64Mi; at most 1Gi.
	MaxModuleSize Size           `yaml:"maxModuleSize" json:"maxModuleSize"`
	Default       PluginSettings `yaml:"default" json:"default"` // for modules the file does not name under modules
	Modules       []Module       `yaml:"modules" json:"modules"`
	// State configures the plugins' key-value state (grants.state).
	State StateSettings `yaml:"state" json:"state"`

	// SourceCache is the content-addressed cache of modules pulled from
	// sources (modules[].source), with each source's last good digest;
	// relative to the config file. "" = beside the compilation cache
	// (Config.SourceCacheDir).
	SourceCache string `yaml:"sourceCache" json:"sourceCache,omitempty"`
	// Registries configures OCI registries by host ("ghcr.io",
	// "localhost:5000"): a CA bundle, mirrors, plain HTTP (sources.go).
	Registries map[string]Registry `yaml:"registries" json:"registries,omitempty"`
	// AllowInsecureRemote lets registries[].insecure name a host that is
	// not loopback.
	AllowInsecureRemote bool `yaml:"allowInsecureRemote" json:"allowInsecureRemote,omitempty"`
	// DockerConfig is a docker config.json (a mounted pull secret's
	// .dockerconfigjson) with the registries' credentials; relative to
	// the config file. "": anonymous pulls.
	DockerConfig string `yaml:"dockerConfig" json:"dockerConfig,omitempty"`
	// FetchTimeout bounds each network step of getting a sourced module:
	// connecting, the TLS handshake, waiting for an answer, each
	// download with its body, and each attempt at one registry, mirror
	// or URL (a resolve, a pull, a signature lookup at each place). A step
	// that does not finish fails the attempt with the reason, and the
	// source is retried. Default 1m; use FetchTimeoutOrDefault.
	FetchTimeout Duration `yaml:"fetchTimeout" json:"fetchTimeout,omitzero"`
}

// Module names one plugin file and overrides plugins.default for it.
type Module struct {
	File string `yaml:"file" json:"file"` // base name in the plugin directory, e.g. "pod-logger.wasm"; unique; must end in .wasm and contain no '/'
	// Source, when set, is where the module comes from instead of the
	// plugin directory: oci://registry/repo:tag, oci://registry/repo@sha256:...,
	// https://... (with SHA256), file://path or
	// configmap://namespace/name/key. File is then the plugin's
	// name, and a same-named file in the directory is ignored (sources.go).
	Source string `yaml:"source" json:"source,omitempty"`
	// SHA256 pins the module's bytes: required for https://, allowed for
	// file:// and configmap://. "sha256:<hex>" or the bare hex; Load stores "sha256:<hex>".
	SHA256 string `yaml:"sha256" json:"sha256,omitempty"`
	// PullPolicy is Always, IfNotPresent or Never (PullAlways...); default
	// IfNotPresent for a pinned source, Always for a tag or an unpinned file.
	PullPolicy string `yaml:"pullPolicy" json:"pullPolicy,omitempty"`
	// RefreshInterval is how often a movable source (a tag, an unpinned
	// file) is resolved again; default 5m with pullPolicy Always, none
	// otherwise; refused for a pinned source.
	RefreshInterval Duration `yaml:"refreshInterval" json:"refreshInterval,omitzero"`
	// FailurePolicy is what /readyz says while a sourced plugin has no good
	// version: "fail-closed" (not ready; the default) or "fail-open".
	FailurePolicy  string `yaml:"failurePolicy" json:"failurePolicy,omitempty"`
	PluginSettings `yaml:",inline"`
}

// PluginSettings is what a plugin receives and how it is confined. After
// Load, plugins.default and every module hold effective values; use
// Config.SettingsFor for a module the file may not name.
type PluginSettings struct {
	Bindings []Binding `yaml:"bindings" json:"bindings"`
	Delivery Delivery  `yaml:"delivery" json:"delivery"`
	Limits   Limits    `yaml:"limits" json:"limits"`
	// Config is handed to the plugin's init export as JSON bytes; any YAML
	// value. See Config.ConfigJSON.
	Config any `yaml:"config" json:"config,omitempty"`
	// Grants are the capabilities the plugin may use; none by default.
	Grants Grants `yaml:"grants" json:"grants,omitempty"`
	// Verify is the signature policy of a module with a source (nil: none);
	// plugins.default's applies to every sourced module without its own.
	// It has no effect on the directory's modules.
	Verify *Verify `yaml:"verify" json:"verify,omitempty"`
	// Controller, when set, makes the plugin a controller of one
	// resource (ABI.md §18): it is handed keys through ih_reconcile, not
	// events, and its bindings are derived from For, Owns and Watches.
	Controller *Controller `yaml:"controller" json:"controller,omitempty"`

	// Namespace, when set, confines the plugin to one namespace: it is a
	// team's Plugin object's (internal/pluginresource sets it, never the
	// file). Its bindings deliver, and its cache reads, writes, children
	// and Events reach, only objects of that namespace.
	Namespace string `yaml:"-" json:"-"`
}

// Controller is a controller-mode plugin's settings (README, "Writing a
// controller plugin").
type Controller struct {
	// For is the primary resource (a Resource.Name): its keys are what
	// the plugin reconciles.
	For string `yaml:"for" json:"for"`
	// Filter is a CEL expression over the primary object; a key whose
	// object fails it is not reconciled (an absent key is).
	Filter string `yaml:"filter" json:"filter,omitempty"`
	// GenerationChanged skips updates of a primary that leave
	// metadata.generation unchanged (status-only updates).
	GenerationChanged bool `yaml:"generationChanged" json:"generationChanged,omitempty"`
	// Owns are the resources of the primaries' children: an event on one
	// enqueues the primary its controller ownerReference (or the host's
	// owner annotation) names.
	Owns []string `yaml:"owns" json:"owns,omitempty"`
	// Watches are related resources mapped to primaries by the host.
	Watches []Watch `yaml:"watches" json:"watches,omitempty"`
	// Finalizer, when set, is added to every primary before the plugin
	// first acts on it and removed once the plugin has answered OK for it
	// while it was being deleted.
	Finalizer string `yaml:"finalizer" json:"finalizer,omitempty"`
	// OnRemove is what happens to Finalizer on live objects when the
	// plugin is removed from the configuration: "keep" (the default) or
	// "release".
	OnRemove string `yaml:"onRemove" json:"onRemove,omitempty"`
}

// Watch maps the objects of one resource to the primaries they concern.
// Exactly one of Label, Annotation, Field, Map and ReferencedBy is set.
type Watch struct {
	Resource string `yaml:"resource" json:"resource"`
	// Label, Annotation and Field name the primary on the watched
	// object: "name" (the watched object's namespace) or "namespace/name".
	Label      string `yaml:"label" json:"label,omitempty"`
	Annotation string `yaml:"annotation" json:"annotation,omitempty"`
	Field      string `yaml:"field" json:"field,omitempty"`
	// Map is a CEL expression over the watched object returning a key or
	// a list of keys of primaries.
	Map string `yaml:"map" json:"map,omitempty"`
	// ReferencedBy is a CEL expression over a primary returning the keys
	// of the watched objects it refers to; an event on a watched object
	// enqueues every primary referring to it.
	ReferencedBy string `yaml:"referencedBy" json:"referencedBy,omitempty"`
}

// Binding subscribes a plugin to one configured resource.
type Binding struct {
	Resource string   `yaml:"resource" json:"resource"` // a Resource.Name
	Events   []string `yaml:"events" json:"events"`     // subset of add, update, delete; empty = all three

	// Filter is a CEL expression over type, object, oldObject and
	// resource; events for which it is false are not delivered. See
	// package filter for what a plugin sees when an object starts or stops
	// matching.
	Filter string `yaml:"filter" json:"filter,omitempty"`
	// Changed lists field paths; an update is delivered only when one of
	// them differs between the old and the new object.
	Changed []string `yaml:"changed" json:"changed,omitempty"`
	// Resyncs delivers updates that change nothing (informer resyncs and
	// relists); they are dropped by default.
	Resyncs bool `yaml:"resyncs" json:"resyncs,omitempty"`
	// OnFilterError is what a filter evaluation error means: "open"
	// (deliver, the default) or "closed" (drop).
	OnFilterError string `yaml:"onFilterError" json:"onFilterError,omitempty"`
	// DropSelfNoop drops an update caused by the plugin's own write
	// (header flag FlagSelfWrite) in which nothing the plugin would see
	// changed but metadata.resourceVersion and metadata.managedFields
	// (ABI.md §17.1). Default false: such updates arrive, flagged.
	DropSelfNoop bool `yaml:"dropSelfNoop" json:"dropSelfNoop,omitempty"`
	// GenerationChanged drops an update that leaves metadata.generation
	// as it was (a change of status or metadata only), except the one
	// that sets metadata.deletionTimestamp. Default false.
	GenerationChanged bool `yaml:"generationChanged" json:"generationChanged,omitempty"`
}

// FilterSpec returns the binding's host-side filter.
func (b *Binding) FilterSpec() filter.Spec {
	return filter.Spec{Expression: b.Filter, Changed: b.Changed, Resyncs: b.Resyncs, OnError: b.OnFilterError, GenerationChanged: b.GenerationChanged}
}

// Wants reports whether the binding asks for events of type event. An
// empty Events list (a binding not normalised by Load) wants everything.
func (b *Binding) Wants(event string) bool {
	if len(b.Events) == 0 {
		return true
	}
	for _, e := range b.Events {
		if e == event {
			return true
		}
	}
	return false
}

// Delivery shapes the queue between an informer and a plugin.
type Delivery struct {
	Mode       string `yaml:"mode" json:"mode"`             // "every" (default) or "latest"
	BufferSize int    `yaml:"bufferSize" json:"bufferSize"` // hard cap of the plugin's buffer; default 10000
	// MaxRetries is how often an object whose handling failed (RETRY,
	// or ERROR with onError: retry) is handed again before the host gives
	// up on it, counts it as dropped and waits for its next change. Unset
	// or -1 (UnlimitedRetries, the default): never give up. 0: never
	// retry.
	MaxRetries int `yaml:"maxRetries" json:"maxRetries"`
	// RetryBackoff is the first per-object retry delay; it doubles with
	// each retry of the object up to MaxRetryBackoff, and all retries of
	// the plugin together are held to 10 per second (burst 100), as
	// client-go's DefaultControllerRateLimiter does. Default 5ms; 0s =
	// no per-object delay.
	RetryBackoff    Duration `yaml:"retryBackoff" json:"retryBackoff"`
	MaxRetryBackoff Duration `yaml:"maxRetryBackoff" json:"maxRetryBackoff"` // default 1000s
	// OnError is what a handler's ERROR answer does: "retry" (default)
	// retries the object with backoff; "skip" gives up on the event.
	OnError string `yaml:"onError" json:"onError"`
	// MissedDeletes is what the host does with a delete the plugin could
	// not see (it happened while the daemon was down, the plugin
	// unloaded or quarantined, or the object another member's): "deliver"
	// (default) hands it late, flagged missed-delete, once the informer
	// has synced; "skip" does not (RATIONALE.md, "Deletes seen after the
	// fact").
	MissedDeletes string `yaml:"missedDeletes" json:"missedDeletes"`
}

// Limits confine a plugin instance.
type Limits struct {
	MemoryPages uint32 `yaml:"memoryPages" json:"memoryPages"` // 64 KiB pages; default 1024 (64 MiB); max 65536
	// CallTimeout is the deadline of one call into the plugin; default 1s.
	// An explicit 0s means no deadline: enforcing one makes wazero check
	// for cancellation inside loops, which costs measurable time, so a
	// trusted, hot plugin may opt out. Check CallTimeout.Duration == 0, not
	// IsSet: after Load every duration is set.
	CallTimeout Duration `yaml:"callTimeout" json:"callTimeout"`
	// MaxConsecutiveFailures quarantines the plugin once it has failed
	// (trapped, timed out, run out of memory) this often since it was
	// last stable: successes in between do not end the streak, only
	// StablePeriod without a failure does. Default 5.
	MaxConsecutiveFailures int `yaml:"maxConsecutiveFailures" json:"maxConsecutiveFailures"`
	// RestartBackoff is the first restart delay; it doubles with each
	// failure of the streak up to MaxRestartBackoff. Default 1s, 1m.
	RestartBackoff    Duration `yaml:"restartBackoff" json:"restartBackoff"`
	MaxRestartBackoff Duration `yaml:"maxRestartBackoff" json:"maxRestartBackoff"`
	// StablePeriod without a failure ends the plugin's failure streak
	// (the restart delay and the quarantine count start over). Default
	// 10m.
	StablePeriod Duration `yaml:"stablePeriod" json:"stablePeriod"`
	// ParkAfter failures of calls handling one object (traps, deadline
	// kills, memory failures, ERROR answers) park it: it is not handed
	// to the plugin again, not even by a restart's replay, until it
	// changes or its backoff (at least StablePeriod) ends. Default 3; 0
	// = never park.
	ParkAfter int `yaml:"parkAfter" json:"parkAfter"`
	// MaxCallTime bounds one call's wall time, the waits of its host calls
	// (HTTP requests, writes) included, which CallTimeout does not count;
	// at least CallTimeout. Absent (zero): 10 times CallTimeout, at least
	// 1m. It applies only with a CallTimeout (abi/ABI.md §12).
	MaxCallTime Duration `yaml:"maxCallTime" json:"maxCallTime"`
	// MaxHostCallsPerCall caps the host calls of one call; the call that
	// would make one more is stopped as a timeout. Absent (zero): 100000.
	MaxHostCallsPerCall int `yaml:"maxHostCallsPerCall" json:"maxHostCallsPerCall"`
}

// Server configures the HTTP endpoint for metrics, /healthz, /readyz and
// /debug/plugins.
type Server struct {
	Address string `yaml:"address" json:"address"` // default ":9090"; never "" after Load; "off" disables
}

// LeaderElection lets several replicas run with one of them active.
type LeaderElection struct {
	Enabled       bool     `yaml:"enabled" json:"enabled"`
	Namespace     string   `yaml:"namespace" json:"namespace"`         // default: the pod's namespace from the service account, else "default"
	LeaseName     string   `yaml:"leaseName" json:"leaseName"`         // default "informer-host"
	LeaseDuration Duration `yaml:"leaseDuration" json:"leaseDuration"` // default 15s
	RenewDeadline Duration `yaml:"renewDeadline" json:"renewDeadline"` // default 10s
	RetryPeriod   Duration `yaml:"retryPeriod" json:"retryPeriod"`     // default 2s
}

// Load reads and parses the config file at path. Problems with the file's
// content come back as Errors, all of them at once; a file that cannot be
// read comes back as the os error, wrapped.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses data as a config file named file (used in problem
// locations and as the base of relative paths; may be ""). On success the
// Config is validated and has every default filled in. On failure the
// error is an Errors holding every problem found, sorted by line.
func Parse(file string, data []byte) (*Config, error) {
	c, p := decode(file, data)
	if p.root != nil {
		validate(p, c)
	}
	if p.root == nil || len(p.list) > 0 {
		p.list.sort()
		return nil, p.list
	}
	applyDefaults(c, p)
	c.File = file
	c.lines = entryLines(p, c)
	return c, nil
}

// Dir returns the directory of the config file, or "" when it was parsed
// without a name (relative paths are then relative to the working
// directory).
func (c *Config) Dir() string {
	if c.File == "" {
		return ""
	}
	return filepath.Dir(c.File)
}

// ResolvePath interprets p the way the config file means it: absolute
// paths as they are, relative ones against the config file's directory,
// so the file works wherever the daemon is started from. "" stays "".
func (c *Config) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir(), p)
}

// PluginDir returns the directory to load *.wasm modules from.
func (c *Config) PluginDir() string {
	d := c.Plugins.Directory
	if d == "" {
		d = DefaultPluginDirectory
	}
	return c.ResolvePath(d)
}

// ModuleSizeLimit returns the largest module file the host reads, in
// bytes: plugins.maxModuleSize, or its default for a Config built in code.
func (c *Config) ModuleSizeLimit() int64 {
	if c.Plugins.MaxModuleSize <= 0 {
		return int64(DefaultMaxModuleSize)
	}
	return int64(c.Plugins.MaxModuleSize)
}

// FetchTimeoutOrDefault returns plugins.fetchTimeout, or its default for
// a Config built in code.
func (c *Config) FetchTimeoutOrDefault() time.Duration {
	if c.Plugins.FetchTimeout.Duration <= 0 {
		return DefaultFetchTimeout
	}
	return c.Plugins.FetchTimeout.Duration
}

// KubeconfigPath returns the kubeconfig file named in the config, resolved
// against the config file's directory, or "" when none is named.
func (c *Config) KubeconfigPath() string {
	return c.ResolvePath(c.Kubeconfig)
}

// CompilationCacheDir returns the directory for wazero's compilation
// cache. It is resolved here rather than at Load because the user cache
// directory may not exist in a container, and that should only matter to
// whoever opens the cache.
func (c *Config) CompilationCacheDir() (string, error) {
	if c.Plugins.CompilationCache != "" {
		return c.ResolvePath(c.Plugins.CompilationCache), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("plugins.compilationCache is not set and there is no user cache directory: %w", err)
	}
	return filepath.Join(base, "informer-host", "wazero"), nil
}

// Resource returns the configured resource called name.
func (c *Config) Resource(name string) (*Resource, bool) {
	for i := range c.Resources {
		if c.Resources[i].Name == name {
			return &c.Resources[i], true
		}
	}
	return nil, false
}

// Module returns the modules entry for file, if the config names it.
func (c *Config) Module(file string) (*Module, bool) {
	for i := range c.Plugins.Modules {
		if c.Plugins.Modules[i].File == file {
			return &c.Plugins.Modules[i], true
		}
	}
	return nil, false
}

// SettingsFor returns the effective settings of the plugin in file (a base
// name such as "pod-logger.wasm"): its modules entry merged field by field
// over plugins.default, built-in defaults filled in, and binding events
// normalised (none means add, update and delete). A module the config does
// not name gets plugins.default. The result is a copy; changing it does
// not change c.
func (c *Config) SettingsFor(file string) PluginSettings {
	if c.resolved {
		if m, ok := c.Module(file); ok {
			return m.PluginSettings.clone()
		}
		return c.Plugins.Default.clone()
	}
	// A Config built in code rather than parsed: no YAML tells us what was
	// set, so non-zero values are taken as set.
	def := resolveSettings(c.Plugins.Default, setByValue(c.Plugins.Default), PluginSettings{}, 0)
	if m, ok := c.Module(file); ok {
		return resolveSettings(m.PluginSettings, setByValue(m.PluginSettings), def, allFields)
	}
	return def
}

// ConfigJSON returns the config value of the plugin in file (after the
// same merge as SettingsFor) encoded as JSON, for the plugin's init
// export. A plugin without config gets nil.
func (c *Config) ConfigJSON(file string) ([]byte, error) {
	v := c.SettingsFor(file).Config
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return nil, fmt.Errorf("config for plugin %s: %w", file, err)
	}
	return b, nil
}

// Duration is a time.Duration written as a Go duration string ("30s",
// "1m"). Set records that the file gave a value, because for some fields
// an explicit 0s means something different from leaving it out.
type Duration struct {
	time.Duration
	Set bool
}

// NewDuration returns d as a Duration that counts as set.
func NewDuration(d time.Duration) Duration { return Duration{Duration: d, Set: true} }

// IsSet reports whether the value was given (or filled in by defaults).
func (d Duration) IsSet() bool { return d.Set }

// UnmarshalYAML accepts only strings: a bare number is ambiguous (seconds?
// nanoseconds?), and guessing wrong by a factor of 10^9 is worse than
// asking. Errors are returned as *yaml.TypeError so that the decoder keeps
// going and every problem in the file is reported, not just the first.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	fail := func(format string, args ...any) error {
		// The column lets decode find the node, and from it the path.
		return &yaml.TypeError{Errors: []string{
			fmt.Sprintf("line %d: column %d: %s", n.Line, n.Column, fmt.Sprintf(format, args...)),
		}}
	}
	if n.Kind != yaml.ScalarNode {
		return fail("expected a duration string like \"30s\", got %s", describeNode(n))
	}
	switch n.ShortTag() {
	case "!!str":
	case "!!int", "!!float":
		return fail("%s is a number; use a duration string like \"30s\"", n.Value)
	default:
		return fail("expected a duration string like \"30s\", got %s", describeNode(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fail("cannot use %q as a duration; use a Go duration string like \"30s\" or \"1m30s\" (units: ns, us, ms, s, m, h)", n.Value)
	}
	*d = Duration{Duration: v, Set: true}
	return nil
}

// MarshalText writes the duration string, so that dumps of the effective
// config (YAML or JSON) read like the file.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// UnmarshalText parses a duration string; it makes JSON round trips work.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration{Duration: v, Set: true}
	return nil
}

// Size is a number of bytes, written as an integer or as a Kubernetes
// quantity ("64Mi", "1G"), so a limit reads the way it does in a pod spec.
type Size int64

// UnmarshalYAML accepts an integer or a quantity string. Errors are
// *yaml.TypeError, like Duration's, so decoding goes on.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	fail := func(format string, args ...any) error {
		return &yaml.TypeError{Errors: []string{
			fmt.Sprintf("line %d: column %d: %s", n.Line, n.Column, fmt.Sprintf(format, args...)),
		}}
	}
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!str") {
		return fail("expected a size like 64Mi or a number of bytes, got %s", describeNode(n))
	}
	v, err := parseSize(n.Value)
	if err != nil {
		return fail("%v", err)
	}
	*s = v
	return nil
}

func parseSize(text string) (Size, error) {
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return 0, fmt.Errorf("cannot use %q as a size; use a number of bytes or a quantity like 64Mi or 100M", text)
	}
	v, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("%q is not a whole number of bytes", text)
	}
	return Size(v), nil
}

// String writes the size the way a file would, in the largest binary unit
// that divides it.
func (s Size) String() string {
	return resource.NewQuantity(int64(s), resource.BinarySI).String()
}

// MarshalText writes String, so dumps of the effective config read like the file.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a size; it makes JSON round trips work.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := parseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
