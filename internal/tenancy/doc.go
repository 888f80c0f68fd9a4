// Package tenancy admits a team's plugin, asked for by a Plugin object in
// the team's namespace, within the ceiling the operator's tenancy block
// gives that namespace, and confines it there: Admit checks every binding,
// grant and limit of the module against the ceiling and, through a
// Reviewer (SubjectAccessReview), against what the plugin's
// ServiceAccount may do itself, and refuses the module whole when
// anything is over; an admitted module comes back with its namespace set
// (the host then delivers, reads, writes and records Events only there),
// its write grants narrowed to that namespace, the ServiceAccount as its
// identity and its limits capped.
//
// Rule of direction: it imports internal/config, internal/pluginapi and
// client-go; internal/pluginresource and internal/daemon import it; it
// imports neither, nor host.
package tenancy
