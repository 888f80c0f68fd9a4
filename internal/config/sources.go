package config

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Plugins from sources: a plugins.modules entry with a source gets its
// bytes from an OCI registry, an https:// URL or a file:// path instead of
// the plugin directory (internal/pluginsource pulls, verifies, caches and
// loads them). Its file: is the plugin's name.

// Pull policies (modules[].pullPolicy), as a container image's.
const (
	// PullAlways resolves the source on every start and every refresh.
	PullAlways = "Always"
	// PullIfNotPresent uses the cached bytes of the source's digest when
	// the cache has them, and fetches them otherwise.
	PullIfNotPresent = "IfNotPresent"
	// PullNever uses only the cache: the source's last good digest.
	PullNever = "Never"
)

// Failure policies (modules[].failurePolicy): what /readyz says while a
// sourced plugin has no good version.
const (
	FailClosed = "fail-closed"
	FailOpen   = "fail-open"
)

// DefaultRefreshInterval is how often a movable source with pullPolicy
// Always is resolved again when the module does not say.
const DefaultRefreshInterval = 5 * time.Minute

// MinRefreshInterval keeps a typo ("5ms" for "5m") from polling a registry
// hundreds of times a second.
const MinRefreshInterval = time.Second

// Source schemes.
const (
	SchemeOCI   = "oci"
	SchemeHTTPS = "https"
	SchemeFile  = "file"
	// SchemeConfigMap is configmap://<namespace>/<name>/<key>: a module
	// kept in a ConfigMap key (binaryData, else data), read through the
	// Kubernetes API as the module's grants.impersonate identity when it
	// has one.
	SchemeConfigMap = "configmap"
)

// DefaultConfigMapRefreshInterval is how often an unpinned configmap://
// source is read again when the module does not say: a ConfigMap is
// edited in place, like a file, and a read costs the apiserver one GET.
const DefaultConfigMapRefreshInterval = 30 * time.Second

// Verify is a sourced module's signature policy (sigstore: keys or keyless
// identities). A module with required: true is not loaded unless a
// signature verifies.
type Verify struct {
	// Required refuses a module whose signature does not verify; without
	// it a failed verification is reported and the module loads.
	Required bool `yaml:"required" json:"required"`
	// Keys are files of public keys (PEM) any of which may have signed;
	// relative to the config file.
	Keys []string `yaml:"keys" json:"keys,omitempty"`
	// Identities are the keyless signers accepted: an OIDC issuer and a
	// certificate subject (an e-mail, a workflow URL).
	Identities []Identity `yaml:"identities" json:"identities,omitempty"`
	// TrustedRoot is a sigstore trusted_root.json, read from disk and
	// never fetched; identities need it (there is no built-in root).
	TrustedRoot string `yaml:"trustedRoot" json:"trustedRoot,omitempty"`
}

// Identity is one keyless signer: who issued the certificate and to whom.
type Identity struct {
	Issuer  string `yaml:"issuer" json:"issuer"`
	Subject string `yaml:"subject" json:"subject"`
}

// Clone returns a deep copy (nil for nil).
func (v *Verify) Clone() *Verify {
	if v == nil {
		return nil
	}
	c := *v
	c.Keys = append([]string(nil), v.Keys...)
	c.Identities = append([]Identity(nil), v.Identities...)
	return &c
}

// Registry configures one OCI registry host (plugins.registries).
type Registry struct {
	// CABundle is a PEM file of the CAs the registry's certificate is
	// checked against, besides the system's; relative to the config file.
	CABundle string `yaml:"caBundle" json:"caBundle,omitempty"`
	// Mirrors are hosts tried first, in order, for pulls from this one.
	Mirrors []string `yaml:"mirrors" json:"mirrors,omitempty"`
	// Insecure speaks plain HTTP to the registry: only to a loopback host,
	// unless plugins.allowInsecureRemote.
	Insecure bool `yaml:"insecure" json:"insecure,omitempty"`
}

// SourceRef is a parsed modules[].source.
type SourceRef struct {
	Raw    string // as written
	Scheme string // SchemeOCI, SchemeHTTPS, SchemeFile or SchemeConfigMap
	// OCI: Registry ("ghcr.io", "localhost:5000"), Repository
	// ("org/plugins/pod-logger") and one of Tag and Digest
	// ("sha256:<hex>").
	Registry, Repository, Tag, Digest string
	// URL is the https:// address.
	URL string
	// Path is the file:// path, resolved against the config file.
	Path string
	// ConfigMap: Namespace, Name and the Key holding the module.
	Namespace, Name, Key string
}

// Repo is the OCI repository with its registry ("ghcr.io/org/x"); for the
// other schemes the raw source.
func (r SourceRef) Repo() string {
	if r.Scheme == SchemeOCI {
		return r.Registry + "/" + r.Repository
	}
	return r.Raw
}

var (
	ociRepoRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	ociTagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseSource parses a modules[].source; relative file:// paths are
// resolved against dir.
func ParseSource(raw, dir string) (SourceRef, error) {
	ref := SourceRef{Raw: raw}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ref, fmt.Errorf("%q has no scheme; write oci://registry/repo:tag, oci://registry/repo@sha256:..., https://..., file://path or configmap://namespace/name/key", raw)
	}
	ref.Scheme = scheme
	switch scheme {
	case SchemeOCI:
		host, repo, ok := strings.Cut(rest, "/")
		if !ok || host == "" || repo == "" {
			return ref, fmt.Errorf("%q: an OCI source is oci://registry/repository:tag or @sha256:<digest>, e.g. oci://ghcr.io/org/pod-logger:v1", raw)
		}
		ref.Registry = host
		if r, d, ok := strings.Cut(repo, "@"); ok {
			if _, err := normaliseDigest(d); err != nil || !strings.HasPrefix(d, "sha256:") {
				return ref, fmt.Errorf("%q: the digest must be sha256:<64 hex digits>", raw)
			}
			repo, ref.Digest = r, strings.ToLower(d)
		} else if i := strings.LastIndex(repo, ":"); i >= 0 {
			repo, ref.Tag = repo[:i], repo[i+1:]
			if !ociTagRE.MatchString(ref.Tag) {
				return ref, fmt.Errorf("%q: %q is not a valid tag (letters, digits, '_', '.', '-', at most 128)", raw, ref.Tag)
			}
		} else {
			return ref, fmt.Errorf("%q names no tag or digest; write :tag or @sha256:<digest> (there is no implicit :latest)", raw)
		}
		if !ociRepoRE.MatchString(repo) {
			return ref, fmt.Errorf("%q: %q is not a valid repository (lower-case components separated by '/')", raw, repo)
		}
		ref.Repository = repo
	case SchemeHTTPS:
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return ref, fmt.Errorf("%q is not a valid https:// URL", RedactSource(raw))
		}
		ref.URL = raw
	case SchemeFile:
		p := rest
		if p == "" {
			return ref, fmt.Errorf("%q names no file; write file:///abs/path.wasm or file://relative/path.wasm", raw)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		ref.Path = p
	case SchemeConfigMap:
		if err := parseConfigMapSource(&ref, rest); err != nil {
			return ref, err
		}
	case "http":
		return ref, fmt.Errorf("%q: plain http:// is refused; use https:// with sha256, or an OCI registry", RedactSource(raw))
	default:
		return ref, fmt.Errorf("%q: unknown scheme %q; use oci://, https://, file:// or configmap://", raw, scheme)
	}
	return ref, nil
}

// parseConfigMapSource fills ref from the "<namespace>/<name>/<key>"
// after configmap://, each part checked as the apiserver would, so a typo
// is reported at load and not as a NotFound on every refresh.
func parseConfigMapSource(ref *SourceRef, rest string) error {
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return fmt.Errorf("%q: a ConfigMap source is configmap://<namespace>/<name>/<key>, e.g. configmap://team-a/labeler/labeler.wasm", ref.Raw)
	}
	ns, name, key := parts[0], parts[1], parts[2]
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%q: namespace %q is not valid: %s", ref.Raw, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%q: ConfigMap name %q is not valid: %s", ref.Raw, name, strings.Join(errs, "; "))
	}
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		return fmt.Errorf("%q: key %q is not valid: %s", ref.Raw, key, strings.Join(errs, "; "))
	}
	ref.Namespace, ref.Name, ref.Key = ns, name, key
	return nil
}

// normaliseDigest accepts "sha256:<hex>" or the bare hex and returns
// "sha256:<hex>" in lower case.
func normaliseDigest(d string) (string, error) {
	h := strings.ToLower(strings.TrimPrefix(d, "sha256:"))
	if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
		return "", fmt.Errorf("%q is not a sha256 digest; write sha256:<64 hex digits>", d)
	}
	return "sha256:" + h, nil
}

// SourceRef returns the module's parsed source; ok is false for a module
// of the plugin directory.
func (c *Config) SourceRef(m *Module) (SourceRef, bool) {
	if m.Source == "" {
		return SourceRef{}, false
	}
	ref, err := ParseSource(m.Source, c.Dir())
	return ref, err == nil
}

// Pinned reports whether the module's source names fixed bytes: an OCI
// digest, or a sha256 (https, and file when given).
func (m *Module) Pinned() bool {
	if m.SHA256 != "" {
		return true
	}
	ref, err := ParseSource(m.Source, "")
	return err == nil && ref.Digest != ""
}

// Sourced lists the modules that come from a source, in file order.
func (c *Config) Sourced() []*Module {
	var out []*Module
	for i := range c.Plugins.Modules {
		if c.Plugins.Modules[i].Source != "" {
			out = append(out, &c.Plugins.Modules[i])
		}
	}
	return out
}

// IsSourced reports whether the plugin named file comes from a source, so
// that the plugin directory's file of that name is ignored.
func (c *Config) IsSourced(file string) bool {
	m, ok := c.Module(file)
	return ok && m.Source != ""
}

// SourceCacheDir returns the directory of the sources' content-addressed
// cache: plugins.sourceCache, else "sources" beside the compilation cache.
func (c *Config) SourceCacheDir() (string, error) {
	if c.Plugins.SourceCache != "" {
		return c.ResolvePath(c.Plugins.SourceCache), nil
	}
	cc, err := c.CompilationCacheDir()
	if err != nil {
		return "", fmt.Errorf("plugins.sourceCache is not set and %w", err)
	}
	return filepath.Join(filepath.Dir(cc), "sources"), nil
}

// ShadowedFiles reports the sourced modules whose name is also a file in
// the plugin directory (present: its *.wasm names): that file is ignored.
func (c *Config) ShadowedFiles(dir string, present []string) Errors {
	have := map[string]bool{}
	for _, f := range present {
		have[f] = true
	}
	var out Errors
	for i, m := range c.Plugins.Modules {
		if m.Source != "" && have[m.File] {
			out = append(out, c.problemAt(path{"plugins", "modules", i, "file"},
				"the plugin directory's %s is ignored: this plugin comes from %s (rename the file, or drop source: to use it)",
				filepath.Join(dir, m.File), RedactSource(m.Source)))
		}
	}
	return out
}

// applySourceDefaults fills in a sourced module's pull policy, refresh
// interval and failure policy.
func (m *Module) applySourceDefaults(c *Config, p *problems, mp path) {
	if m.Source == "" {
		return
	}
	if m.SHA256 != "" {
		m.SHA256, _ = normaliseDigest(m.SHA256)
	}
	pinned := m.Pinned()
	if m.PullPolicy == "" {
		m.PullPolicy = PullAlways
		if pinned {
			m.PullPolicy = PullIfNotPresent
		}
	}
	if !p.present(mp.key("refreshInterval")) {
		m.RefreshInterval = NewDuration(0)
		if !pinned && m.PullPolicy == PullAlways {
			m.RefreshInterval = NewDuration(DefaultRefreshInterval)
			if ref, err := ParseSource(m.Source, ""); err == nil && ref.Scheme == SchemeConfigMap {
				m.RefreshInterval = NewDuration(DefaultConfigMapRefreshInterval)
			}
		}
	}
	if m.FailurePolicy == "" {
		m.FailurePolicy = FailClosed
	}
}

// validateModuleSource checks a module's source fields.
func validateModuleSource(p *problems, mp path, m *Module) {
	sp := mp.key("source")
	if m.Source == "" {
		for _, k := range []string{"sha256", "pullPolicy", "refreshInterval", "failurePolicy", "verify"} {
			if p.present(mp.key(k)) {
				p.add(mp.key(k), "applies only to a module with a source (oci://, https://, file:// or configmap://); this one is read from plugins.directory")
			}
		}
		return
	}
	dir := ""
	if p.file != "" {
		dir = filepath.Dir(p.file)
	}
	ref, err := ParseSource(m.Source, dir)
	if err != nil {
		p.add(sp, "%v", err)
		return
	}
	if m.SHA256 != "" {
		if _, err := normaliseDigest(m.SHA256); err != nil {
			p.add(mp.key("sha256"), "%v", err)
		}
	}
	switch ref.Scheme {
	case SchemeHTTPS:
		if m.SHA256 == "" {
			p.add(sp, "an https:// source needs sha256: the digest of the module's bytes (sha256sum plugin.wasm), so what is fetched is what you meant")
		}
	case SchemeOCI:
		if m.SHA256 != "" {
			p.add(mp.key("sha256"), "an OCI source is pinned by its digest: write %s@sha256:<manifest digest> instead of sha256:", ref.Registry+"/"+ref.Repository)
		}
	case SchemeFile, SchemeConfigMap:
		// Not checked for existence: like a registry, the file (a mounted
		// volume) or the ConfigMap may be missing for a while, and the
		// source then runs from its cached last good version, degraded,
		// until it is back.
	}
	pinned := m.SHA256 != "" || ref.Digest != ""
	switch m.PullPolicy {
	case "", PullAlways, PullIfNotPresent, PullNever:
	default:
		p.add(mp.key("pullPolicy"), "unknown pull policy %q; use Always, IfNotPresent or Never", m.PullPolicy)
	}
	if rp := mp.key("refreshInterval"); p.present(rp) {
		switch {
		case pinned:
			p.add(rp, "the source is pinned (a digest or sha256), so it never changes: drop refreshInterval, or name a tag to follow")
		case m.PullPolicy != "" && m.PullPolicy != PullAlways:
			p.add(rp, "a refresh needs pullPolicy: Always (this one is %s)", m.PullPolicy)
		case m.RefreshInterval.Duration != 0 && m.RefreshInterval.Duration < MinRefreshInterval:
			p.add(rp, "%s is below the minimum of %s; 0s turns the refresh off", m.RefreshInterval.Duration, MinRefreshInterval)
		case m.RefreshInterval.Duration < 0:
			p.add(rp, "must not be negative")
		}
	}
	switch m.FailurePolicy {
	case "", FailClosed, FailOpen:
	default:
		p.add(mp.key("failurePolicy"), "unknown failure policy %q; use fail-closed (not ready without a good version) or fail-open", m.FailurePolicy)
	}
	validateVerify(p, mp.key("verify"), m.Verify)
}

// validateVerify checks a verify policy: it must be able to succeed, and
// its files must be there.
func validateVerify(p *problems, vp path, v *Verify) {
	if v == nil {
		return
	}
	if v.Required && len(v.Keys) == 0 && len(v.Identities) == 0 {
		p.add(vp, "required: true needs keys or identities to verify against")
	}
	readable := func(at path, f string) { readableFile(p, at, f) }
	for i, k := range v.Keys {
		if k == "" {
			p.add(vp.key("keys").index(i), "empty key file name")
			continue
		}
		readable(vp.key("keys").index(i), k)
	}
	for i, id := range v.Identities {
		ip := vp.key("identities").index(i)
		if id.Issuer == "" {
			p.add(ip.key("issuer"), "required: the OIDC issuer of the signing certificate, e.g. https://token.actions.githubusercontent.com")
		}
		if id.Subject == "" {
			p.add(ip.key("subject"), "required: the certificate's subject (an e-mail or a workflow URL)")
		}
	}
	switch {
	case v.TrustedRoot != "":
		readable(vp.key("trustedRoot"), v.TrustedRoot)
	case len(v.Identities) > 0:
		// The verifier ships no root and never fetches one (no TUF at
		// start, so it works air-gapped): without a file every keyless
		// signature would be refused at every attempt, long after the
		// file was accepted.
		p.add(vp.key("identities"), "keyless signatures are checked against a trusted root read from disk, never fetched: "+
			"mount a trusted_root.json and set %s.trustedRoot (for the public sigstore instance, the trusted_root.json target of its TUF repository, tuf-repo-cdn.sigstore.dev; "+
			"for your own instance, `cosign trusted-root create` writes one)", vp)
	}
}

// validateRegistries checks plugins.registries and the credentials file.
func validateRegistries(p *problems, c *Config) {
	readable := func(at path, f string) { readableFile(p, at, f) }
	if c.Plugins.DockerConfig != "" {
		readable(path{"plugins", "dockerConfig"}, c.Plugins.DockerConfig)
	}
	hosts := make([]string, 0, len(c.Plugins.Registries))
	for h := range c.Plugins.Registries {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		r := c.Plugins.Registries[h]
		rp := path{"plugins", "registries", h}
		if strings.Contains(h, "/") || h == "" {
			p.add(rp, "%q is not a registry host; write the host (and port) only, e.g. ghcr.io or localhost:5000", h)
		}
		if r.CABundle != "" {
			readable(rp.key("caBundle"), r.CABundle)
		}
		for i, m := range r.Mirrors {
			if m == "" || strings.Contains(m, "://") {
				p.add(rp.key("mirrors").index(i), "%q: a mirror is a registry host (and port, and optionally a path), without a scheme", m)
			}
		}
		if r.Insecure && !isLoopbackHost(h) && !c.Plugins.AllowInsecureRemote {
			p.add(rp.key("insecure"), "plain HTTP to %s, which is not loopback, would let anyone on the way swap the module; use TLS (caBundle), or set plugins.allowInsecureRemote: true if you mean it", h)
		}
	}
}

// isLoopbackHost reports whether host[:port] is localhost or a loopback
// address.
func isLoopbackHost(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// readableFile reports the file f names at at when it cannot be read
// (relative to the config file).
func readableFile(p *problems, at path, f string) {
	fp := f
	if !filepath.IsAbs(fp) && p.file != "" {
		fp = filepath.Join(filepath.Dir(p.file), fp)
	}
	if _, err := os.Stat(fp); err != nil {
		p.add(at, "cannot read %s: %v (relative paths are relative to the config file)", f, err)
	}
}

// RedactSource is a source as it may be shown (logs, errors, status,
// the unauthenticated /readyz): an http(s):// URL without its user info,
// query and fragment, which may hold credentials or a pre-signed
// signature; any other source as it is.
func RedactSource(raw string) string {
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Unparsable: show the scheme only rather than risk the rest.
		return raw[:strings.Index(raw, "://")+3] + "(unparsable URL)"
	}
	u.User = nil
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "REDACTED", false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
