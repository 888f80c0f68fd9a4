/* Native test of informer_host_reconcile.h over informer_host_fake.h's
 * controller loop (make kits-test): children built with the JSON writer,
 * applied and pruned, status and conditions, requeue-after on the fake
 * clock, deleting -> OK -> finalizer gone, per-child failures surfaced. */
#include "informer_host_fake.h"

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

/* A widget wants spec.replicas ConfigMaps <name>-<i>; Ready with their
 * count; every spec.every ms again. */
static int32_t widgets(const ih_request *req, ih_outcome *out) {
	char buf[32], name[80];
	if (!req->exists || req->deleting) {
		ih_children_none(out);
		/* A status for a gone primary: ERR_ABSENT, which the kit skips. */
		if (!req->exists) ih_json_member_bool(ih_status_begin(out), "gone", 1);
		return IH_OK;
	}
	if (ih_field_read(IH_OBJECT, "spec.fail", 9, buf, sizeof buf) >= 0) {
		/* A failure reported as a condition: the children left alone. */
		ih_child_begin(out, "v1", "ConfigMap");
		ih_child_end(out);
		ih_set_condition(out, "Ready", "False", "Waiting", "spec.fail is set");
		ih_requeue_after(out, 5000);
		ih_set_error("spec.fail is set", 16);
		return IH_RETRY;
	}
	int64_t r = ih_field_read(IH_OBJECT, "spec.replicas", 13, buf, sizeof buf - 1);
	int replicas = r >= 0 ? atoi((buf[ih_field_size(r)] = 0, buf)) : 0;
	ih_children_none(out);
	for (int i = 0; i < replicas; i++) {
		snprintf(name, sizeof name, "%.*s-%d", (int)req->name_len, req->name, i);
		ih_json *c = ih_child_begin(out, "v1", "ConfigMap");
		ih_json_member_object(c, "metadata");
		ih_json_member_str(c, "name", name);
		ih_json_member_object(c, "labels");
		ih_json_member_str(c, "app", "wid\"get");
		ih_child_end(out);
	}
	ih_json *s = ih_status_begin(out);
	ih_json_member_int(s, "replicas", replicas);
	ih_set_condition(out, "Ready", "Unknown", "", "");
	ih_set_condition(out, "Ready", replicas ? "True" : "False", "Applied", "config maps applied");
	r = ih_field_read(IH_OBJECT, "spec.every", 10, buf, sizeof buf - 1);
	if (r >= 0) ih_requeue_after(out, atoi((buf[ih_field_size(r)] = 0, buf)));
	return IH_OK;
}
IH_RECONCILER(widgets);
IH_NOT_A_HANDLER();

static struct ih_fake_object *widget(const char *name, const char *replicas) {
	char key[64];
	snprintf(key, sizeof key, "shop/%s", name);
	struct ih_fake_object *o = ih_fake_cached("widgets", key);
	ih_fake_set(o, "metadata.name", IH_KIND_STRING, name);
	ih_fake_set(o, "spec.replicas", IH_KIND_NUMBER, replicas);
	return o;
}

int main(void) {
	/* The JSON writer: commas, nesting, escapes. */
	char jb[128];
	ih_json j;
	ih_json_init(&j, jb, sizeof jb);
	ih_json_object(&j);
	ih_json_member_str(&j, "a", "x\n\"y\"");
	ih_json_member_array(&j, "b");
	ih_json_int(&j, -12);
	ih_json_bool(&j, 1);
	ih_json_object(&j);
	ih_json_end(&j);
	ih_json_end(&j);
	ih_json_member_int(&j, "c", 0);
	ih_json_end(&j);
	CHECK(j.len == 44 && !memcmp(jb, "{\"a\":\"x\\u000a\\\"y\\\"\",\"b\":[-12,true,{}],\"c\":0}", 44));
	ih_json_init(&j, jb, 4);
	ih_json_str(&j, "toolong");
	CHECK(j.overflow);

	/* Children applied into the store, the finalizer first, the status sent. */
	ih_fake_controller("widgets", "example.com/cleanup");
	ih_fake_owns("configmaps", "ConfigMap");
	widget("w", "3");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "w", 0) == IH_OK);
	CHECK(ih_fake_ctl.n_applied == 3 && !strcmp(ih_fake_ctl.applied[2], "configmaps shop/w-2"));
	CHECK(ih_fake_children("shop", "w") == 3 && ih_fake_cached_object("configmaps", "shop/w-1"));
	CHECK(!strcmp(ih_fake_get(ih_fake_cached_object("widgets", "shop/w"), "metadata.finalizers"), "[\"example.com/cleanup\"]"));
	CHECK(!strcmp(ih_fake_ctl.status, "{\"replicas\":3,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Applied\",\"message\":\"config maps applied\"}]}"));
	CHECK(ih_fake_requeue("shop", "w") == -1);

	/* Scale down: the stale children pruned; requeue on the fake clock. */
	ih_fake_set(widget("w", "1"), "spec.every", IH_KIND_NUMBER, "30000");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "w", 0) == IH_OK);
	CHECK(ih_fake_ctl.n_pruned == 2 && !strcmp(ih_fake_ctl.pruned[0], "configmaps shop/w-1") && !ih_fake_cached_object("configmaps", "shop/w-2"));
	CHECK(ih_fake_requeue("shop", "w") == 30000);
	CHECK(ih_fake_advance(29999, ih_reconcile) == 0 && ih_fake_advance(1, ih_reconcile) == 1);
	CHECK(ih_fake_requeue("shop", "w") == 30000);

	/* A failed child: IH_ERROR naming it, the others applied, status written. */
	widget("w", "3");
	ih_fake_fail_child("ConfigMap", "shop/w-1", "ERR_FORBIDDEN: configmaps is forbidden");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "w", 0) == IH_ERROR);
	CHECK(!strcmp(ih_fake.error, "children_apply: 1 children failed: ConfigMap shop/w-1: ERR_FORBIDDEN: configmaps is forbidden"));
	CHECK(ih_fake_ctl.n_applied == 2 && ih_fake_ctl.n_status == 1);
	ih_fake_fail_child("ConfigMap", "shop/w-1", "");

	/* Delete: deleting -> children gone -> OK -> finalizer removed, object gone. */
	ih_fake_set(ih_fake_cached_object("widgets", "shop/w"), "metadata.finalizers", IH_KIND_ARRAY, "[\"other\",\"example.com/cleanup\"]");
	ih_fake_delete("shop", "w");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "w", 0) == IH_OK);
	CHECK(ih_fake_children("shop", "w") == 0 && !ih_fake_cached_object("configmaps", "shop/w-0"));
	CHECK(!strcmp(ih_fake_get(ih_fake_cached_object("widgets", "shop/w"), "metadata.finalizers"), "[\"other\"]"));
	ih_fake_set(ih_fake_cached_object("widgets", "shop/w"), "metadata.finalizers", IH_KIND_ARRAY, "[\"example.com/cleanup\"]");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "w", 0) == IH_OK && !ih_fake_cached_object("widgets", "shop/w"));

	/* Absent: the flag, ERR_ABSENT reads, every child pruned after OK. */
	widget("v", "2");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "v", IH_FLAG_INITIAL_LIST) == IH_OK && ih_fake_children("shop", "v") == 2);
	ih_fake_cached_object("widgets", "shop/v")->used = 0;
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "v", 0) == IH_OK);
	CHECK((ih_fake.header[2] & IH_FLAG_ABSENT) && ih_fake_ctl.n_pruned == 2 && ih_fake_children("shop", "v") == 0);
	CHECK(ih_fake_ctl.n_status == 0); /* refused ERR_ABSENT, skipped: the answer stays IH_OK */

	/* A failed reconcile writes its status, applies no children, keeps no timer. */
	ih_fake_set(widget("f", "1"), "spec.fail", IH_KIND_BOOL, "true");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "f", 0) == IH_RETRY && !strcmp(ih_fake.error, "spec.fail is set"));
	CHECK(ih_fake_ctl.n_applied == 0 && ih_fake_ctl.n_status == 1 && strstr(ih_fake_ctl.status, "\"Waiting\"") && ih_fake_requeue("shop", "f") == -1);

	/* The host's refusals, and the imports outside a reconcile. */
	ih_fake_controller("widgets", "");
	widget("w", "1");
	CHECK(ih_fake_reconcile(ih_reconcile, "shop", "w", 0) == IH_ERROR);
	CHECK(!strcmp(ih_fake.error, "children_apply: ERR_DENIED: children_apply: ConfigMap is not of a resource in controller.owns"));
	CHECK(ih_children_apply("[]", 2) == IH_ERR_NO_EVENT && ih_status_apply("{}", 2) == IH_ERR_NO_EVENT && ih_reconcile_requeue_after(1) == IH_ERR_NO_EVENT);
	CHECK(ih_handle(0) == IH_ERROR && strstr(ih_fake.error, "controller:"));

	if (failures) return 1;
	printf("ok: informer_host_reconcile.h\n");
	return 0;
}
