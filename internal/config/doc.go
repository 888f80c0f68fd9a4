// Package config reads informer-host's configuration file: which
// Kubernetes resources to watch, which WebAssembly plugins receive their
// events and under what limits, and how the daemon itself is served and
// elected.
//
// The file is YAML with a version, so that a later schema can change what
// a field means without an old file being misread:
//
//	apiVersion: informer-host/v1
//	resources:
//	  - name: pods
//	    version: v1
//	    kind: Pod
//	plugins:
//	  directory: build/plugins
//	  modules:
//	    - file: pod-logger.wasm
//	      bindings: [{resource: pods}]
//
// The config.yaml at the top of the repository is a commented example of
// every field (TestShippedConfigShowsEveryField walks these types' yaml
// tags to keep it so: a new field goes there too).
//
// # Loading
//
//	conf, err := config.Load("config.yaml")
//	if err != nil {
//		fmt.Fprintln(os.Stderr, err) // one "config.yaml:12: ..." line per problem
//		os.Exit(2)
//	}
//	for _, r := range conf.Resources { ... }
//	s := conf.SettingsFor("pod-logger.wasm")  // effective settings of one plugin
//	initArg, err := conf.ConfigJSON("pod-logger.wasm")
//
// A Config returned without error is valid and complete: every default is
// filled in, every module's settings are already merged over
// plugins.default, and binding events are spelled out. Consumers should
// not need to know the defaults, and should not re-validate.
//
// # Errors
//
// Decoding is strict: an unknown field is an error, not a silently ignored
// setting, and so is a value of the wrong type. Load and Parse do not stop
// at the first problem; they return an Errors value listing every problem
// in the file, sorted by line, each as "file:line: path: what is wrong",
// where path is the offending value's place in the document, such as
// resources[1].labelSelector. A value the decoder could not read is
// reported once, not again as missing or invalid.
//
// # Set versus zero
//
// Where zero is a meaningful setting, the file's wording decides, not the
// Go zero value: "callTimeout: 0s" means no deadline, while leaving
// callTimeout out means the default of 1s; likewise "maxRetries: 0"
// (never retry) and "parkAfter: 0" (never park) in a module override the
// defaults (never give up, park after 3), and leaving maxRetries out (or
// -1) never gives up on an object. A null value ("callTimeout:" with
// nothing after it) counts as absent. Duration keeps this distinction in
// its Set field; after Load every duration is set.
//
// Durations are Go duration strings ("500ms", "1m30s"). A bare number is
// rejected rather than guessed at, since seconds and nanoseconds differ by
// a factor of a billion.
//
// # Paths
//
// Relative paths in the file (plugins.directory, plugins.compilationCache,
// kubeconfig) are relative to the file's own directory, so the daemon
// behaves the same whatever directory it is started from; use PluginDir,
// CompilationCacheDir and KubeconfigPath rather than the raw fields.
//
// Rule of direction: config imports filter (to compile filters while it
// validates) and nearest, and nothing that runs: every daemon package may
// import it, and the schema is what the embeddable library (host,
// informer) names in its API.
package config
