// Package pluginsource gets plugins from their sources (plugins.modules[]
// with source: oci://, https:// or file://) into the host: for each
// sourced plugin a goroutine resolves the source, fetches the bytes it
// names, verifies their signature, keeps them in a content-addressed
// cache, loads them into the host under the plugin's name
// (host.LoadModule) and, for a movable source (a tag, an unpinned file),
// resolves it again every refreshInterval and hot-swaps the plugin through
// the host's reload path when the digest moved.
//
// Failure is per plugin and never destructive: a resolve, fetch, verify or
// load that fails leaves the running version running (the host swaps only
// on success), marks the source degraded with the reason, and is retried
// with capped exponential backoff (client-go's workqueue rate limiter).
// Each source remembers its last good digest in the cache, so a daemon
// that restarts while the registry is down starts the plugin from the
// cache first and refreshes after.
//
// What it needs from the world is three small interfaces: a Fetcher
// (Resolve a source to a digest, Fetch the bytes of a digest), a Verifier
// (sigstore policy over a repository and digest) and a Store (blobs by
// digest, last good digest by source). file:// and https:// fetching
// (https:// through ociartifact.FetchHTTPS: bounded by plugins.fetchTimeout
// and maxModuleSize, the URL's user info and query kept out of errors), an
// on-disk Store, the oci:// Fetcher over internal/ociartifact's client
// (oci.go) and the Verifier over internal/sigverify (sigstore.go) are
// here; the tests use fakes of each beside the real ones.
//
// Rule of direction: imported by internal/daemon (which runs a Manager
// beside the host) and internal/server (which reports its Status); it
// imports internal/config, internal/ociartifact, internal/sigverify,
// go-containerregistry's reference names (which sigverify's options
// take) and client-go's workqueue, and reaches the host only through the Loader interface, so
// it does not import host and host does not import it.
package pluginsource
