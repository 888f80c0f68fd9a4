// Package sigverify decides whether a plugin artifact in an OCI registry is
// signed by someone the operator trusts, with sigstore-go and nothing on
// the network but the registry holding the artifact.
//
// A Policy names what to trust: PEM public keys (files) and keyless
// identities (an OIDC issuer and a certificate subject, exact or as a
// regular expression) checked against a trusted_root.json read from disk.
// There is never a TUF fetch: the trusted root is what the operator
// mounted, so verification works offline and changes only when the
// operator changes that file.
//
// What is signed is the manifest digest D the artifact is pulled by. A
// signature counts for D only when it names D: a DSSE envelope holding an
// in-toto statement of predicate type https://sigstore.dev/cosign/sign/v1
// (what cosign v3 writes for `cosign sign`) whose subjects include
// sha256:D, or a message signature whose message digest is D (the
// manifest bytes signed as a blob). Because the manifest names the module
// layer by digest, binding to D binds the module too; a signature over
// the layer digest alone is not accepted, since the same layer under
// another manifest could carry other annotations or config. A statement
// of another predicate type (SBOM, provenance) is an attestation, not a
// signature, and does not count.
//
// Where signatures are found for D: at each location of the artifact in
// turn, as WithLocations gives them (the daemon gives a registry's
// mirrors in order, then the registry, the order pulls try them), or only
// in the repository R Verify is given. A signature verified at any
// location counts, since it names D: signatures copied with the module
// to an on-site mirror serve an air-gapped cluster. At each location
// (repository R), in this order:
//
//  1. the OCI referrers of D (remote.Referrers, which itself falls back to
//     the referrers tag sha256-<hex> when the registry has no referrers
//     API): manifests whose artifactType (or, for registries that report
//     the config media type instead, whose own artifactType field or
//     config) is application/vnd.dev.sigstore.bundle.v0.3+json, with one
//     layer holding the sigstore bundle JSON — cosign v3's layout.
//     Anyone who can push to R can push referrers, so they are filtered
//     before any is fetched and the reason of a refusal says how many
//     were skipped and why: a referrer of another artifact type (an
//     SBOM) is skipped, and so is one whose
//     dev.sigstore.bundle.predicateType annotation names another
//     predicate (a cosign attestation). Those listed with the bundle
//     type are looked at first, up to 128; those with no type or the
//     empty config's (what registries reporting the config media type
//     show for cosign's own signatures) after them, up to another 128,
//     so that junk of one kind cannot use up the other's share. Each
//     costs two small requests; 70 junk referrers listed before a good
//     signature do not hide it, several hundred do (the price of a
//     bound), and the location's timeout bounds them all;
//  2. the legacy tag sha256-<hex>.sig: a layer of that bundle media type,
//     or cosign's simple-signing layer
//     (application/vnd.dev.cosign.simplesigning.v1+json) with its
//     signature in the dev.cosignproject.cosign/signature annotation;
//     the simple-signing payload must name D as docker-manifest-digest.
//     With a key, the signature is checked against the policy's keys.
//     Keyless, the certificate comes from dev.sigstore.cosign/certificate
//     and the Rekor entry with its signed entry timestamp from
//     dev.sigstore.cosign/bundle, checked as a v0.1 sigstore bundle (the
//     only version that may carry a promise without an inclusion proof);
//     the dev.sigstore.cosign/chain and rfc3161timestamp annotations are
//     not read, so such a signature needs the Rekor timestamp.
//
// With WithLocalLayout, an OCI image layout on disk (where `informer-host
// bundle load` puts the signatures a bundle carries) is looked in first,
// through the same lookup as a registry, the layout standing in for it
// (local.go); a signature found there is checked like any other, and the
// registry is asked when none verifies.
//
// Keys are verified without a transparency log entry or timestamp
// (sigstore-go's WithNoObserverTimestamps): a key has no validity period
// to check a signing time against, it is trusted for as long as the
// policy names it, and SignWithKey signs offline with neither Rekor nor a
// timestamp authority. Keyless signatures are the opposite: the Fulcio
// certificate lives minutes, so it must chain to a certificate authority
// of the trusted root, appear in one of its transparency logs, and carry
// a trusted time (the log's signed entry timestamp or an RFC 3161
// timestamp from one of its timestamp authorities) inside the
// certificate's validity. The certificate's embedded SCTs are not
// checked (cosign checks them too): the transparency log entry is the
// proof of publication this package relies on.
//
// Every registry request of a verification is governed by the caller's
// context (a stop or a reload cancels it, whatever context the options of
// WithRemoteOptions carry) and each location's lookup by WithTimeout
// (DefaultTimeout, 30s): a registry that accepts a request and never
// answers is a failure naming the stall. SignWithKey and AttachBundle
// follow their context the same way.
//
// The policy's key and trusted root files are read again at each
// verification (and compiled again when their contents changed): a
// leaked key is revoked by replacing its file, at the next verification,
// with no restart.
//
// Verified results are cached by digest and policy (a policy's keys,
// identities and trusted root, hashed by content, so a replaced file
// misses the results of the old one), in memory and optionally in a
// JSON file next to the module store, so a restart neither re-verifies
// nor needs the registry. Only verified results are cached: a refusal is
// looked at again next time, since a signature can be attached later.
//
// Rule of direction: sigverify imports sigstore-go, go-containerregistry,
// the standard library and internal/ociartifact (for the one sorting of
// referrers that `bundle save` uses too, so the two look at the same
// signatures); it imports neither host/ nor internal/daemon nor
// internal/config. The daemon (and the command) build a Policy from
// the config and call it.
package sigverify
