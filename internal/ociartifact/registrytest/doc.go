// Package registrytest runs OCI registries in process on loopback for
// tests: the CNCF Distribution registry (distribution/v3, in-memory
// storage, optionally behind htpasswd basic auth) and
// go-containerregistry's registry (with the referrers API), each behind a
// hook that lets a test tamper with what is served and a log of the
// requests that reached it.
//
// Rule of direction: for tests only (of ociartifact and the commands and
// daemon packages that use it); it imports the registries and
// go-containerregistry, nothing of informer-host.
package registrytest
