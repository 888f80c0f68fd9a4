// Package ociartifact moves plugin modules between this machine and where
// they are published: OCI registries (pull, push, resolve a tag to a
// digest), HTTPS URLs pinned by a sha256, local files, and OCI image
// layout tarballs for sites without a registry; and it keeps what it
// fetched in a content-addressed store on disk, with each source's last
// good digest, so a daemon restarted while a registry is down starts
// from what it had.
//
// What it reads from a registry is one WebAssembly module, in one of
// four forms (Format): the CNCF TAG Runtime Wasm artifact (config
// application/vnd.wasm.config.v0+json, one application/wasm layer; what
// Push writes), one application/wasm layer under any other config (what
// `oras push ref plugin.wasm:application/wasm` writes), wasm-to-oci's
// (one application/vnd.wasm.content.layer.v1+wasm layer), and Istio's image
// form (a docker or OCI image of exactly one tar or tar+gzip layer
// holding plugin.wasm). Anything else is refused with the media types it
// has. Sizes are checked against MaxModuleSize before a blob is read
// (its descriptor) and while it is read (a registry that lies), and every
// blob against its digest.
//
// An image index is accepted when it names exactly one module: that one
// is chosen, whatever its platform says, and Artifact.IndexDigest records
// the index. The choice is made from the manifests alone (each distinct
// digest read once, stopping at a second Wasm artifact), and only the
// chosen manifest's layer is downloaded: a Wasm artifact (CNCF or
// wasm-to-oci form) is a module by its media types, and an image, which
// may or may not hold plugin.wasm, is read only when the index has no
// Wasm artifact and no other image. Two, or none, is an error naming
// them.
//
// Nothing a registry or server does can hold a caller without end or
// fill its memory: every network step (connect, TLS handshake, waiting
// for an answer, each download with its body, and each attempt at one
// registry whole) is bounded by Options.Timeout, and a stall is a
// *StallError naming the host and the bound; a manifest, an index or a
// referrers list is cut at MaxManifestSize (4 MiB, what the CNCF
// Distribution registry stores) as it is read, and refused unread when
// its Content-Length or descriptor says more. RemoteOptions carries both
// bounds to other packages' requests (signature lookups), and
// NewHTTPClient to https:// downloads.
//
// A bundle (SaveBundle, LoadBundle) is an OCI image layout tar of modules
// with their signatures: each module's manifest byte for byte (an index
// kept as the index, with the manifests it lists), and the sigstore bundle
// referrers and legacy .sig tag of its digest, which LoadBundle puts in
// the store's SignatureDir, a layout a verifier reads in place of a
// registry; this package copies signatures and never judges them. Anyone
// who can push to a repository can push referrers, so saving picks them
// with SortSignatureReferrers, which internal/sigverify's lookup uses too
// (this package names the media types and annotation; it does not import
// the verifier, which imports it):
// attestations (a dev.sigstore.bundle.predicateType annotation naming
// another predicate than cosign's sign one) and other artifact types are
// passed over unfetched; referrers typed as sigstore bundles are looked at
// first, up to 128, then untyped ones (no type, or the empty config's), up
// to another 128; one that cannot be copied (gone, failing, not a
// signature, over 1 MiB a blob or 2 MiB in all, over 4 layers, 64 for the
// .sig tag) is skipped, and SaveBundle says per module how many were saved
// and what was skipped and why. Every signature among those looked at is
// saved, with no smaller bound: junk typed as a bundle, which only a
// verifier can tell from a signature, then hides a good signature from a
// bundle only when it would hide it from a lookup at the registry (over
// 128 listed before it), at the price of a bundle of a repository full of
// junk carrying it (up to 256 × 2 MiB, within LoadBundle's total, which
// allows 2 MiB per entry, and up to about 1,600 files, so that a bundle of
// several such modules may pass LoadBundle's 4096: save such a module in a
// bundle of its own). Loading writes only what index.json references,
// refuses sparse entries, and stays within a total stated in LoadBundle's
// doc.
//
// Rule of direction: ociartifact imports go-containerregistry and the
// standard library, nothing of host/ or the daemon (internal/daemon,
// internal/config): it knows refs, bytes and directories, not
// config.yaml or plugins. What a module imports (the ABI version and
// capabilities Push records as annotations) is the caller's to read,
// with host/inspect, and pass in. The daemon's source manager and
// cmd/informer-host's push, pull, inspect and bundle commands import it,
// and so does internal/sigverify, for SortSignatureReferrers; its
// registrytest subpackage is for tests only.
package ociartifact
