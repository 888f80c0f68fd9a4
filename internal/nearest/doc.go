// Package nearest ranks known names by how likely each is the one a user
// meant when the name they wrote matched nothing: a case slip, a missing
// or extra end ("pod" for "pods"), a typo ("confgimaps"). It serves the
// "did you mean" hints of the config file, the plugin directory and the
// apiserver's resources, so that all of them judge closeness alike.
//
// Rule of direction: nearest imports only the standard library; config
// and informer import it for their hints.
package nearest
