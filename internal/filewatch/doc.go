// Package filewatch tells when one file changes, the way config files
// change in practice: written in place, replaced by a rename (editors,
// kubectl cp), or swapped through a symlink (a Kubernetes ConfigMap
// volume, where the file is a link into "..data", itself a link swapped
// atomically).
//
// It watches the file's directory, not the file: a watch on a file is
// lost when the file is replaced. Events are debounced, and a change is
// reported only when the file's content differs from the last reported
// content, so touching or rewriting it unchanged reports nothing.
//
// Rule of direction: filewatch imports nothing of informer-host; the
// daemon's command (config reload) imports it. It knows files, not what
// they say.
package filewatch
