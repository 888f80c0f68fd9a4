package engine

import (
	"context"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
)

// Synced calls ih_synced(header_len), if the plugin exports it, to tell it
// that it has handled the initial list of its binding to res. During the
// call header_read returns a header of event type 0 (no event) whose
// resource strings name res and whose object strings are empty; the object
// functions return ERR_ABSENT. It reports whether the export was called.
// Failures are those of Handle: a *Failure means the instance is dead.
func (i *Instance) Synced(ctx context.Context, res *event.ResourceRef) (bool, error) {
	if err := i.usable(); err != nil {
		return false, err
	}
	fn := i.mod.ExportedFunction(abi.ExportSynced)
	if fn == nil {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	env := NewEnvelope(&event.Event{Resource: res})
	i.st.env, i.st.callCtx = env, ctx
	i.stack[0] = uint64(len(env.header))
	err := i.call(fn)
	i.st.env, i.st.callCtx = nil, nil
	if err != nil {
		return true, i.failure(ctx, abi.ExportSynced, err, true)
	}
	return true, nil
}
