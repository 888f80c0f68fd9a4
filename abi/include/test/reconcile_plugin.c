/* The C kit's controller-mode test plugin (informer_host_reconcile.h),
 * built for wasm32-wasi and run through the engine by
 * host/internal/engine's TestKitReconcile: one ConfigMap named after the
 * key, a Ready condition, a requeue after a minute; none for an absent
 * key. */
#include "informer_host_reconcile.h"

IH_ABI_V1_MARKER();

static int32_t reconcile(const ih_request *req, ih_outcome *out) {
	if (!req->exists) {
		ih_children_none(out);
		return IH_OK;
	}
	ih_json *c = ih_child_begin(out, "v1", "ConfigMap");
	ih_json_member_object(c, "metadata");
	ih_json_key(c, "name");
	ih_json_strn(c, req->name, req->name_len);
	ih_child_end(out);
	ih_set_condition(out, "Ready", "True", "Copied", "");
	ih_requeue_after(out, 60000);
	return IH_OK;
}
IH_RECONCILER(reconcile);
IH_NOT_A_HANDLER();
