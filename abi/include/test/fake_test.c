/* Native test of informer_host_fake.h (make kits-test): a handler that
 * uses every capability, run against the fake, and what the fake recorded,
 * answered and left in its cache. */
#include "informer_host_fake.h"

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

/* The plugin under test: labels the event's ConfigMap by apply, reads it
 * back from the cache, records an Event, posts to an upstream, counts in
 * state and a metric; a failed call is its ERROR with the result message. */
static int32_t fail_with_message(void) {
	char msg[256];
	int32_t n = ih_result_message(msg, sizeof msg);
	ih_set_error(msg, n < (int32_t)sizeof msg ? n : (int32_t)sizeof msg);
	return IH_ERROR;
}
static int32_t handle(int32_t header_len) {
	char ns[64], name[64], rv[32];
	(void)header_len;
	int32_t nl = (int32_t)ih_field_read(IH_OBJECT, "metadata.namespace", 18, ns, sizeof ns);
	int32_t ml = (int32_t)ih_field_read(IH_OBJECT, "metadata.name", 13, name, sizeof name);
	static const char body[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"labels\":{\"team\":\"a\"}}}";
	int32_t h = ih_k8s_write(IH_WRITE_APPLY, "configmaps", 10, ns, nl, name, ml, "", 0, body, sizeof body - 1, "", 0, "", 0, IH_WRITE_MUST_EXIST);
	if (h < 0) return fail_with_message();
	int32_t c = ih_cache_get("configmaps", 10, ns, nl, name, ml);
	int32_t rl = (int32_t)ih_field_read(c, "metadata.resourceVersion", 24, rv, sizeof rv);
	ih_log(IH_LOG_INFO, rv, rl);
	if (ih_event_record(IH_OBJECT, IH_KUBE_EVENT_NORMAL, "Labelled", 8, "team a", 6) < 0) return fail_with_message();
	int32_t status = ih_http_request("chat", 4, "POST", 4, "/x", 2, "", 0, "{}", 2);
	if (status < 0) return fail_with_message();
	int64_t v;
	char n[8] = "0";
	ih_state_get("n", 1, n, sizeof n, &v);
	n[0]++;
	ih_state_set("n", 1, n, 1, IH_STATE_ANY_VERSION);
	static const char d[] = "{\"name\":\"labelled_total\"}";
	ih_metric_add(ih_metric_declare(IH_METRIC_COUNTER, d, sizeof d - 1), 1, "", 0);
	return IH_OK;
}

static void answer_201(const struct ih_fake_http_request *r, struct ih_fake_http_response *out) {
	(void)r;
	out->status = 201;
	strcpy(out->body, "created");
}
static int32_t rate_limited(const struct ih_fake_write *w, char *message, int32_t len) {
	snprintf(message, (size_t)len, "would wait 12s for %s", w->name);
	return IH_ERR_RATE_LIMITED;
}

int main(void) {
	/* A must-exist apply of a missing object: ERR_ABSENT, recorded. */
	ih_fake_reset();
	ih_fake_event(IH_EVENT_ADD, 0, "configmaps", "demo", "x");
	CHECK(ih_fake_handle(handle) == IH_ERROR);
	CHECK(strcmp(ih_fake.error, "configmaps \"x\" not found") == 0);
	CHECK(ih_fake.n_writes == 1 && ih_fake.writes[0].op == IH_WRITE_APPLY && ih_fake.writes[0].flags == IH_WRITE_MUST_EXIST);
	CHECK(strcmp(ih_fake.writes[0].ns, "demo") == 0 && strcmp(ih_fake.writes[0].name, "x") == 0 && strstr(ih_fake.writes[0].body, "\"team\""));

	/* The object cached: the apply lands, the cache sees its version, the
	 * Event is recorded; the upstream is not granted. */
	ih_fake_set(ih_fake_cached("configmaps", "demo/x"), "metadata.resourceVersion", IH_KIND_STRING, "5");
	ih_fake_reset();
	ih_fake_event(IH_EVENT_ADD, 0, "configmaps", "demo", "x");
	CHECK(ih_fake_handle(handle) == IH_ERROR);
	CHECK(strcmp(ih_fake.error, "upstream \"chat\" is not granted (fake: set ih_fake.on_http)") == 0);
	CHECK(ih_fake.n_logs == 1 && strcmp(ih_fake.logs[0], "INFO 1") == 0);
	CHECK(ih_fake.n_events == 1 && strcmp(ih_fake.events[0].reason, "Labelled") == 0 && ih_fake.events[0].which == IH_OBJECT);

	/* Granted: the whole handler runs; state and the metric count. */
	ih_fake.on_http = answer_201;
	ih_fake_reset();
	ih_fake_event(IH_EVENT_ADD, 0, "configmaps", "demo", "x");
	CHECK(ih_fake_handle(handle) == IH_OK);
	CHECK(ih_fake.n_http == 1 && strcmp(ih_fake.http[0].upstream, "chat") == 0 && strcmp(ih_fake.http[0].body, "{}") == 0);
	CHECK(ih_fake.n_metrics == 1 && ih_fake.values[0] == 1);
	CHECK(strcmp(ih_fake_get(ih_fake_cached_object("configmaps", "demo/x"), "metadata.resourceVersion"), "2") == 0);

	/* on_write programs the apiserver; ih_fake_answer fails the next call. */
	ih_fake.on_write = rate_limited;
	ih_fake_reset();
	ih_fake_event(IH_EVENT_ADD, 0, "configmaps", "demo", "x");
	CHECK(ih_fake_handle(handle) == IH_ERROR && strcmp(ih_fake.error, "would wait 12s for x") == 0);
	ih_fake.on_write = NULL;
	ih_fake_answer(IH_ERR_FORBIDDEN, "RBAC says no");
	ih_fake_reset();
	ih_fake_event(IH_EVENT_ADD, 0, "configmaps", "demo", "x");
	CHECK(ih_fake_handle(handle) == IH_ERROR && strcmp(ih_fake.error, "RBAC says no") == 0);
	ih_fake_reset();
	ih_fake_event(IH_EVENT_ADD, 0, "configmaps", "demo", "x");
	CHECK(ih_fake_handle(handle) == IH_OK);
	int64_t v;
	char n[8];
	CHECK(ih_state_get("n", 1, n, sizeof n, &v) == 1 && n[0] == '2');

	/* Fields and the object as the test sets them, by the size protocol. */
	ih_fake_reset();
	ih_fake_event(IH_EVENT_UPDATE, IH_FLAG_HAS_OLD_OBJECT | IH_FLAG_SELF_WRITE, "pods", "shop", "web");
	ih_fake_field(IH_OLD_OBJECT, "status.phase", IH_KIND_STRING, "Pending");
	ih_fake_object(IH_OBJECT, "{\"metadata\":{\"name\":\"web\"}}");
	char buf[64];
	int64_t r = ih_field_read(IH_OLD_OBJECT, "status.phase", 12, buf, 2);
	CHECK(ih_field_kind(r) == IH_KIND_STRING && ih_field_size(r) == 7);
	CHECK(ih_field_read(IH_OBJECT, "status.phase", 12, buf, sizeof buf) == IH_ERR_NOT_FOUND);
	CHECK(ih_object_read(IH_OBJECT, buf, sizeof buf) == 27 && memcmp(buf, "{\"metadata\"", 11) == 0);
	CHECK(ih_header_read(buf, 0) == ih_fake.header_len && (ih_fake.header[2] & IH_FLAG_SELF_WRITE));

	if (failures) return 1;
	printf("ok: informer_host_fake.h\n");
	return 0;
}
