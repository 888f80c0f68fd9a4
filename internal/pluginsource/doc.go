// Package pluginsource gets plugins from their sources (plugins.modules[]
// with source: oci://, https://, file:// or configmap://) into the host: for each
// sourced plugin a goroutine resolves the source, fetches the bytes it
// names, verifies their signature, keeps them in a content-addressed
// cache, loads them into the host under the plugin's name
// (host.LoadModule) and, for a movable source (a tag, an unpinned file or
// ConfigMap),
// resolves it again every refreshInterval and hot-swaps the plugin through
// the host's reload path when the digest moved.
//
// Failure is per plugin and never destructive: a resolve, fetch, verify or
// load that fails leaves the running version running (the host swaps only
// on success), marks the source degraded with the reason, and is retried
// with capped exponential backoff (client-go's workqueue rate limiter),
// never waiting longer than the source's refreshInterval when it has one:
// the operator's interval bounds how long a fix (a signature attached to
// a refused tag, a repaired registry) takes to be picked up.
// Each source remembers its last good digest in the cache, so a daemon
// that restarts while the registry is down starts the plugin from the
// cache first and refreshes after.
//
// Trust is bound to the policy: a verification holds only under the
// verify policy it was made under, named by content (PolicyFingerprint:
// the bytes of the key files and trusted root, and the identities), not
// by file names. The cache's record carries that fingerprint, and the
// in-process cache of verifications is keyed by it. So a restart starts
// from the cache only a version verified under the current policy (under
// verify.required; without it, one starts reported unverified until
// verified), two plugins of one source under different policies do not
// share a verification, and a reload that changes the policy (other keys,
// or a key file replaced with another key) verifies the running version
// again before anything else. Under verify.required a running version
// the new policy does not verify, refused or undecidable (the registry
// down), is unloaded, not kept running: the operator changed the policy
// to stop trusting something, and only a version verified under the
// policy in force may run; without required it keeps running, reported
// unverified. A required source with nothing running whose registry is
// unreachable verifies the cached version where it is (signatures a
// bundle brought) and runs it if that succeeds.
//
// Status tells the version running (digest, the source it came from,
// whether the current policy verified it, and by whom) apart from the
// source as configured, which after a config edit may be another one
// that has no good version yet. A source is shown (logs, Status,
// NotReady, errors) without an https:// URL's user info and query.
//
// What it needs from the world is three small interfaces: a Fetcher
// (Resolve a source to a digest, Fetch the bytes of a digest), a Verifier
// (sigstore policy over a repository and digest) and a Store (blobs by
// digest, last good digest by source). file:// and https:// fetching
// (https:// through ociartifact.FetchHTTPS: bounded by plugins.fetchTimeout
// and maxModuleSize, the URL's user info and query kept out of errors), an
// on-disk Store, the oci:// Fetcher over internal/ociartifact's client
// (oci.go) and the Verifier over internal/sigverify (sigstore.go) are
// here, and configmap:// (configmap.go: a ConfigMap key read through
// client-go as the module's grants.impersonate ServiceAccount when it has
// one, so a tenant's plugin reads only what its identity may; the digest
// is the bytes' sha256, as a file's); the tests use fakes of each beside
// the real ones.
//
// Rule of direction: imported by internal/daemon (which runs a Manager
// beside the host) and internal/server (which reports its Status); it
// imports internal/config, internal/ociartifact, internal/sigverify,
// go-containerregistry's reference names (which sigverify's options
// take) and client-go's workqueue and clientset, and reaches the host only through the Loader interface, so
// it does not import host and host does not import it.
package pluginsource
