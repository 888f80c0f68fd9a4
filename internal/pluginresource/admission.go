package pluginresource

import "k8s.io/apimachinery/pkg/types"

// Admission is what became of one plugin object's spec at one
// generation: admitted (its module is in the daemon's configuration) or
// refused with a reason a person can act on.
type Admission struct {
	// Kind is v1alpha1.KindPlugin or v1alpha1.KindClusterPlugin;
	// Namespace is "" for a ClusterPlugin.
	Kind, Namespace, Name string
	UID                   types.UID
	// Generation is the metadata.generation of the spec this admission
	// read.
	Generation int64
	// Plugin is the host's name of its plugin (v1alpha1.PluginName).
	Plugin string
	// Admitted: the module is in the configuration the daemon applies.
	Admitted bool
	// Reason (a v1alpha1.Reason* constant) and Message say why it was
	// refused; empty when admitted.
	Reason, Message string
	// Source is the spec's source as shown (credentials redacted).
	Source string
	// VerifyPolicy: the spec names a signature policy.
	VerifyPolicy bool
	// Applied: the daemon has applied the configuration this admission
	// went into (Controller.Applied), so the host runs this generation's
	// settings; until then a status must not call the plugin Ready at
	// this generation.
	Applied bool
}
