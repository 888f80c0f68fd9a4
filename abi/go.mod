// The plugin author's module: the ABI's constants and codecs, the Go kit
// and its test host. Standard library only, so that a plugin's module
// graph is its own code and this; the daemon requires it at the ABI
// version it implements (RATIONALE.md, "Project structure").
module github.com/informer-host/informer-host/abi

go 1.24
