package config

// The grants of capabilities II (ABI.md §17): acting on the cluster and
// the world. This file holds their types, shared by the writes, events,
// HTTP and RBAC code; each capability's validation and defaults live
// beside its own code (grants_writes.go, grants_events.go, upstreams.go).
//
// A module's entry replaces plugins.default's grant of each capability as
// a whole, like the grants of capabilities I.

// Capabilities II names, as abi.CapabilityOf gives them.
const (
	CapabilityWrites = "writes"
	CapabilityEvents = "events"
	CapabilityHTTP   = "http"
)

// Write verbs a WriteGrant may list.
const (
	VerbCreate = "create"
	VerbPatch  = "patch" // JSON merge patch and JSON patch
	VerbApply  = "apply" // server-side apply
	VerbDelete = "delete"
)

// WritesGrant lets a plugin write to the Kubernetes API (k8s_*).
type WritesGrant struct {
	// Resources are the resources the plugin may write, each with its
	// verbs and, optionally, namespaces. Anything else is ERR_DENIED
	// without a request.
	Resources []WriteGrant `yaml:"resources" json:"resources"`
	// QPS and Burst are the plugin's token bucket, under the daemon's
	// client-wide limit. Zero takes the defaults.
	QPS   float64 `yaml:"qps" json:"qps,omitempty"`
	Burst int     `yaml:"burst" json:"burst,omitempty"`
	// Timeout bounds one request (the I/O timeout, ABI.md §17), retries
	// after a 429 included. Zero takes the default.
	Timeout Duration `yaml:"timeout" json:"timeout"`
}

// WriteGrant is one resource a plugin may write.
type WriteGrant struct {
	// Resource is a configured resource's name, or "group/version/resource"
	// ("v1/configmaps" for the core group, "apps/v1/deployments").
	Resource string `yaml:"resource" json:"resource"`
	// Verbs: create, patch, apply, delete. Required.
	Verbs []string `yaml:"verbs" json:"verbs"`
	// Subresources the plugin may write besides the object itself
	// ("status"); none = the object only.
	Subresources []string `yaml:"subresources" json:"subresources,omitempty"`
	// Namespaces restricts namespaced writes; none = every namespace.
	Namespaces []string `yaml:"namespaces" json:"namespaces,omitempty"`
}

// Impersonation gives a plugin its own identity: the host impersonates it
// for the plugin's writes and Events, so the apiserver's RBAC and audit
// log see the plugin, not the daemon.
type Impersonation struct {
	// ServiceAccount is "namespace/name".
	ServiceAccount string `yaml:"serviceAccount" json:"serviceAccount"`
}

// EventsGrant lets a plugin record Kubernetes Events (event_*); a
// mapping, even empty ("events: {}"), grants it.
type EventsGrant struct{}

// HTTPGrant lets a plugin call named upstreams (http_*).
type HTTPGrant struct {
	// Upstreams are names of top-level upstreams entries. Required.
	Upstreams []string `yaml:"upstreams" json:"upstreams"`
	// Concurrency bounds the plugin's requests in flight; zero takes the
	// default.
	Concurrency int `yaml:"concurrency" json:"concurrency,omitempty"`
}

// Upstream is an HTTP endpoint the operator names (top-level upstreams).
// A plugin calls it by name with a path under URL; it cannot pass a URL.
type Upstream struct {
	// Name is what a grant and a plugin call it by. Required, unique.
	Name string `yaml:"name" json:"name"`
	// URL is the base, http or https; a plugin's path is joined under it.
	URL string `yaml:"url" json:"url"`
	// Methods allowed; none = POST only.
	Methods []string `yaml:"methods" json:"methods,omitempty"`
	// Headers sent with every request. Values may come from a file or
	// an environment variable of the daemon (tokens); they are never
	// shown in /debug/plugins or logs.
	Headers []UpstreamHeader `yaml:"headers" json:"headers,omitempty"`
	// Timeout bounds one request; zero takes the default.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// MaxRequestBytes and MaxResponseBytes bound bodies; zero takes the
	// defaults.
	MaxRequestBytes  Size `yaml:"maxRequestBytes" json:"maxRequestBytes,omitempty"`
	MaxResponseBytes Size `yaml:"maxResponseBytes" json:"maxResponseBytes,omitempty"`
	// TLS settings for an https URL.
	TLS UpstreamTLS `yaml:"tls" json:"tls"`
}

// UpstreamHeader is one header of an upstream: exactly one of Value,
// ValueFromEnv and ValueFromFile.
type UpstreamHeader struct {
	Name          string `yaml:"name" json:"name"`
	Value         string `yaml:"value" json:"-"`
	ValueFromEnv  string `yaml:"valueFromEnv" json:"valueFromEnv,omitempty"`
	ValueFromFile string `yaml:"valueFromFile" json:"valueFromFile,omitempty"`
}

// UpstreamTLS are the TLS settings of an upstream; paths are relative to
// the config file's directory.
type UpstreamTLS struct {
	CAFile             string `yaml:"caFile" json:"caFile,omitempty"`
	CertFile           string `yaml:"certFile" json:"certFile,omitempty"`
	KeyFile            string `yaml:"keyFile" json:"keyFile,omitempty"`
	ServerName         string `yaml:"serverName" json:"serverName,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify" json:"insecureSkipVerify,omitempty"`
}
