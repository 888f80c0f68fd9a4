package config

// The settings of running informer-host the Kubernetes way: plugins as
// resources (pluginResources), teams' plugins in their own namespaces
// within the operator's ceilings (tenancy), and traces (tracing). Each
// block's validation and defaults live beside the code that reads it.

// Values of pluginResources.watch.
const (
	// WatchAuto watches Plugin and ClusterPlugin objects once the
	// apiserver serves their CRDs, and behaves as a daemon without them
	// until then.
	WatchAuto = "auto"
	// WatchOff never reads them.
	WatchOff = "off"
)

// PluginResources configures the Plugin (namespaced, a team's) and
// ClusterPlugin (cluster-scoped, the operator's) resources of API group
// informer-host.io (internal/pluginapi/v1alpha1). The plugin directory
// and plugins.modules stay: resources add to them.
type PluginResources struct {
	// Watch is "auto" (the default) or "off".
	Watch string `yaml:"watch" json:"watch,omitempty"`
	// StatusInterval is the least time between two status writes of one
	// plugin object by one replica that change only its counters (events
	// delivered, parked objects); a change of condition is written
	// sooner, within a per-object token bucket. Default 10s.
	StatusInterval Duration `yaml:"statusInterval" json:"statusInterval,omitzero"`
	// TrustedRoot is the sigstore trusted_root.json that keyless
	// identities in a resource's spec.verify are checked against; read
	// from disk, relative to this file. "": resources may name keys only.
	TrustedRoot string `yaml:"trustedRoot" json:"trustedRoot,omitempty"`
}

// Tenancy sets what a team's Plugin object in its own namespace may ask
// for. A namespace no ceiling names gets no plugins: its Plugin objects
// are refused, with a condition saying so.
type Tenancy struct {
	Ceilings []Ceiling `yaml:"ceilings" json:"ceilings,omitempty"`
}

// Ceiling is the most a namespace's Plugin objects may request. A
// request over it is refused whole, never partly applied.
type Ceiling struct {
	// Namespaces this ceiling is for; "*" is every namespace no other
	// ceiling names.
	Namespaces []string `yaml:"namespaces" json:"namespaces"`
	// Resources are the configured resources (resources[].name) a
	// tenant's plugin may bind, own, watch and read from the cache; it
	// sees only the objects of its own namespace.
	Resources []string `yaml:"resources" json:"resources,omitempty"`
	// Writes are the resources and verbs a tenant's plugin may be granted
	// (namespaces are not set here: always the plugin's own).
	Writes []WriteGrant `yaml:"writes" json:"writes,omitempty"`
	// Events, State and Metrics allow those grants.
	Events  bool `yaml:"events" json:"events,omitempty"`
	State   bool `yaml:"state" json:"state,omitempty"`
	Metrics bool `yaml:"metrics" json:"metrics,omitempty"`
	// Upstreams are the upstreams[].name a tenant's plugin may be granted.
	Upstreams []string `yaml:"upstreams" json:"upstreams,omitempty"`
	// MaxPlugins bounds the namespace's Plugin objects that run. Default 5.
	MaxPlugins int `yaml:"maxPlugins" json:"maxPlugins,omitempty"`
	// MaxMemoryPages, MaxBufferSize and MaxCallTimeout bound each plugin's
	// limits; a spec leaving them out gets the ceiling's value when it is
	// below the built-in default. Defaults 256 (16 MiB), 1000, 1s.
	MaxMemoryPages uint32   `yaml:"maxMemoryPages" json:"maxMemoryPages,omitempty"`
	MaxBufferSize  int      `yaml:"maxBufferSize" json:"maxBufferSize,omitempty"`
	MaxCallTimeout Duration `yaml:"maxCallTimeout" json:"maxCallTimeout,omitzero"`
	// WritesQPS and WritesBurst are the namespace's write budget: every
	// plugin of the namespace together. Defaults 5 and 10.
	WritesQPS   float64 `yaml:"writesQPS" json:"writesQPS,omitempty"`
	WritesBurst int     `yaml:"writesBurst" json:"writesBurst,omitempty"`
}

// Tracing exports OpenTelemetry traces over OTLP/HTTP: one trace per
// delivery, from the informer event through the guest call to the
// writes, Events and HTTP calls it made. Off unless Endpoint is set.
type Tracing struct {
	// Endpoint is the OTLP/HTTP collector's base URL
	// ("http://otel-collector:4318"); spans go to <endpoint>/v1/traces.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// SampleRatio is the share of deliveries traced, 0 to 1. Default 1.
	SampleRatio *float64 `yaml:"sampleRatio" json:"sampleRatio,omitempty"`
}
