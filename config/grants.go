package config

// Grants are the capabilities the operator gives one plugin. Each is
// denied unless granted; a module entry's grant for a capability replaces
// plugins.default's grant for it (per capability, not merged inside it).
//
// This file holds only the state grant on this branch; the cache and
// metrics grants join it when the branches merge (see issue 11).
type Grants struct {
	// State grants a key-value store that survives the plugin's restarts
	// and reloads; nil = not granted.
	State *StateGrant `yaml:"state" json:"state,omitempty"`
}
