// Package pluginresource runs the plugins that Plugin and ClusterPlugin
// objects (internal/pluginapi/v1alpha1) ask for: it watches them with
// its own informers, reads each spec as config.yaml reads a
// plugins.modules entry (config.ParseModule), admits a team's Plugin
// within its namespace's ceiling (internal/tenancy), and hands the daemon
// the admitted modules, which it merges into the file's configuration and
// applies by the same path as a config reload. What it refused, and why,
// is in Admissions, for the status writer (internal/pluginstatus).
//
// Rule of direction: it imports internal/config, internal/pluginapi and
// client-go; internal/daemon and internal/pluginstatus import it; it
// imports neither, nor host, nor internal/tenancy (the daemon hands it
// tenancy.Admit as Options.Admit).
package pluginresource
