/* informer_host_fake.h: an in-memory informer-host for native unit tests of
 * a C plugin (cc on the machine's own target, not wasm). It defines every
 * import of informer_host.h, so include it in exactly one file of the test
 * program, next to the plugin's source:
 *
 *   #include "informer_host_fake.h"
 *   #include "../plugin.c"
 *   ih_fake_reset();
 *   ih_fake_event(IH_EVENT_ADD, 0, "pods", "shop", "web-0");
 *   ih_fake_field(IH_OBJECT, "status.phase", IH_KIND_STRING, "Running");
 *   int32_t rc = ih_fake_handle(ih_handle);          // the plugin's ih_handle
 *   // ih_fake.writes[0].op == IH_WRITE_APPLY, ih_fake.error, ih_fake.logs ...
 *
 * Objects are their fields (path -> kind, text), as field_read answers
 * them; object_read answers what ih_fake_object set. Every capabilities II
 * call is recorded (ih_fake.writes, .events, .http) and its answer
 * programmable: ih_fake.on_write and ih_fake.on_http, or ih_fake_answer
 * for the next call. By default a write is applied to the fake cache: a
 * create or apply makes the object (ERR_EXISTS for a create of an existing
 * one), a patch, a must-exist apply or a delete of a missing one is
 * ERR_ABSENT, a precondition the object does not meet ERR_CONFLICT, and
 * each change sets a new metadata.resourceVersion, so a later cache_get
 * sees it; the body's fields are not parsed (the fake has no JSON).
 * Sizes are fixed (the IH_FAKE_MAX_* below): a test past them aborts.
 *
 * Controller mode (ABI.md section 18): ih_fake_controller sets up the
 * host's loop over the fake cache as the object store, and
 * ih_fake_reconcile calls the plugin's ih_reconcile for a key as the host
 * does: the finalizer added first, the flags (absent, deleting), the
 * children applied (each child's identity read from the JSON array, kept
 * in the cache as its name, namespace and kind) and those no longer
 * wanted pruned (ih_fake_ctl.applied, .pruned), the status recorded as
 * sent (ih_fake_ctl.status; the conditions' times are the Rust and
 * AssemblyScript fakes'), requeue-after kept on a fake clock that
 * ih_fake_advance moves, the finalizer removed after IH_OK for a deleting
 * object, every child pruned after IH_OK for an absent key. */
#ifndef INFORMER_HOST_FAKE_H
#define INFORMER_HOST_FAKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "informer_host.h"
#include "informer_host_reconcile.h"

#define IH_FAKE_MAX_FIELDS 32 /* per object */
#define IH_FAKE_MAX_OBJECTS 64 /* cached objects */
#define IH_FAKE_MAX_CALLS 64 /* recorded writes, events, requests, logs, state keys, metrics */
#define IH_FAKE_TEXT 256
#define IH_FAKE_BODY 4096

struct ih_fake_field { char path[IH_FAKE_TEXT]; int32_t kind; char value[IH_FAKE_TEXT]; };
struct ih_fake_object {
	int used;
	char resource[IH_FAKE_TEXT], key[IH_FAKE_TEXT];
	struct ih_fake_field fields[IH_FAKE_MAX_FIELDS];
	int n_fields;
};
struct ih_fake_write {
	int32_t op, flags;
	char resource[IH_FAKE_TEXT], ns[IH_FAKE_TEXT], name[IH_FAKE_TEXT], sub[IH_FAKE_TEXT];
	char body[IH_FAKE_BODY], uid[IH_FAKE_TEXT], rv[IH_FAKE_TEXT];
};
struct ih_fake_kube_event { int32_t which, type; char reason[IH_FAKE_TEXT], message[IH_FAKE_BODY]; };
struct ih_fake_http_request {
	char upstream[IH_FAKE_TEXT], method[IH_FAKE_TEXT], path[IH_FAKE_TEXT], header[IH_FAKE_BODY], body[IH_FAKE_BODY];
};
/* An upstream's answer: a status with header ("Name: value\n" lines) and
 * body, or a negative code with message as the result message. */
struct ih_fake_http_response { int32_t status; char header[IH_FAKE_BODY], body[IH_FAKE_BODY]; int32_t code; char message[IH_FAKE_TEXT]; };

static struct {
	uint8_t header[IH_FAKE_BODY];
	int32_t header_len; /* 0: no event */
	struct ih_fake_object event[2]; /* IH_OBJECT, IH_OLD_OBJECT */
	char object_json[2][IH_FAKE_BODY];
	char config[IH_FAKE_BODY];
	char error[IH_FAKE_BODY]; /* set_error */
	char logs[IH_FAKE_MAX_CALLS][IH_FAKE_TEXT]; /* "LEVEL message" */
	int n_logs;
	struct ih_fake_object cache[IH_FAKE_MAX_OBJECTS];
	struct ih_fake_object handles[IH_FAKE_MAX_CALLS];
	int n_handles;
	struct { char key[IH_FAKE_TEXT]; char value[IH_FAKE_TEXT]; int32_t len; int64_t version; int used; } state[IH_FAKE_MAX_CALLS];
	int64_t version, resource_version;
	char metrics[IH_FAKE_MAX_CALLS][IH_FAKE_TEXT]; /* declarations */
	int n_metrics;
	double values[IH_FAKE_MAX_CALLS]; /* by id: the sum of adds and observes, or the last set */
	char result[IH_FAKE_BODY]; /* result_message */
	int32_t answer_code; char answer_message[IH_FAKE_TEXT]; /* ih_fake_answer */
	struct ih_fake_write writes[IH_FAKE_MAX_CALLS]; int n_writes;
	struct ih_fake_kube_event events[IH_FAKE_MAX_CALLS]; int n_events;
	struct ih_fake_http_request http[IH_FAKE_MAX_CALLS]; int n_http;
	struct ih_fake_http_response response; int has_response;
	/* Programmed answers: on_write returns 0 (the object answered is the
	 * one ih_fake_apply_write leaves, or set *answer) or a negative code
	 * with message; on_http fills the response for a request. */
	int32_t (*on_write)(const struct ih_fake_write *w, char *message, int32_t message_len);
	void (*on_http)(const struct ih_fake_http_request *r, struct ih_fake_http_response *out);
} ih_fake;

static inline void ih_fake_need(int ok, const char *what) {
	if (!ok) {
		fprintf(stderr, "informer_host_fake.h: %s: raise IH_FAKE_MAX_*\n", what);
		abort();
	}
}
static inline void ih_fake_copy(char *dst, size_t cap, const char *src, int32_t len) {
	ih_fake_need(len >= 0 && (size_t)len < cap, "a text too long");
	if (len > 0) memcpy(dst, src, (size_t)len);
	dst[len > 0 ? len : 0] = 0;
}
#define IH_FAKE_TEXTOF(dst, p, n) ih_fake_copy(dst, sizeof dst, p, n)
static inline int32_t ih_fake_out(const void *v, int32_t n, void *p, int32_t len) {
	if (n <= len) memcpy(p, v, (size_t)n);
	return n;
}
static inline void ih_fake_set(struct ih_fake_object *o, const char *path, int32_t kind, const char *value) {
	for (int i = 0; i < o->n_fields; i++) {
		if (strcmp(o->fields[i].path, path) == 0) {
			o->fields[i].kind = kind;
			ih_fake_copy(o->fields[i].value, IH_FAKE_TEXT, value, (int32_t)strlen(value));
			return;
		}
	}
	ih_fake_need(o->n_fields < IH_FAKE_MAX_FIELDS, "too many fields");
	struct ih_fake_field *f = &o->fields[o->n_fields++];
	ih_fake_copy(f->path, IH_FAKE_TEXT, path, (int32_t)strlen(path));
	f->kind = kind;
	ih_fake_copy(f->value, IH_FAKE_TEXT, value, (int32_t)strlen(value));
}
static const char *ih_fake_get(const struct ih_fake_object *o, const char *path) {
	for (int i = 0; i < o->n_fields; i++)
		if (strcmp(o->fields[i].path, path) == 0) return o->fields[i].value;
	return "";
}

/* Forgets everything but the state and the cache (a new event). */
static inline void ih_fake_reset(void) {
	ih_fake.header_len = 0;
	memset(ih_fake.event, 0, sizeof ih_fake.event);
	memset(ih_fake.object_json, 0, sizeof ih_fake.object_json);
	ih_fake.error[0] = ih_fake.result[0] = 0;
	ih_fake.n_logs = ih_fake.n_handles = ih_fake.n_writes = ih_fake.n_events = ih_fake.n_http = 0;
	ih_fake.has_response = 0;
}

/* The next event (IH_EVENT_ADD ...; flags of ABI.md 8, IH_FLAG_SELF_WRITE among them). */
static inline void ih_fake_event(int32_t type, int32_t flags, const char *resource, const char *ns, const char *name) {
	const char *s[IH_HEADER_FIELDS] = {resource, "", "v1", resource, "", ns, name, "uid", "1"};
	uint8_t *b = ih_fake.header;
	uint32_t off = IH_HEADER_MIN_SIZE;
	memset(b, 0, IH_HEADER_MIN_SIZE);
	b[0] = 1, b[1] = (uint8_t)type, b[2] = (uint8_t)flags, b[3] = IH_HEADER_FIELDS;
	for (int i = 0; i < IH_HEADER_FIELDS; i++) {
		uint32_t n = (uint32_t)strlen(s[i]);
		ih_fake_need(off + n <= sizeof ih_fake.header, "a header too long");
		memcpy(b + 8 + 8 * i, &off, 4);
		memcpy(b + 12 + 8 * i, &n, 4);
		memcpy(b + off, s[i], n);
		off += n;
	}
	memcpy(b + 4, &off, 4);
	ih_fake.header_len = (int32_t)off;
	ih_fake.event[IH_OBJECT].used = 1;
	ih_fake.event[IH_OLD_OBJECT].used = (flags & IH_FLAG_HAS_OLD_OBJECT) != 0;
	ih_fake_set(&ih_fake.event[IH_OBJECT], "metadata.name", IH_KIND_STRING, name);
	if (*ns) ih_fake_set(&ih_fake.event[IH_OBJECT], "metadata.namespace", IH_KIND_STRING, ns);
}
/* A field of the event's object or old object; kind IH_KIND_STRING takes
 * the string's text, any other JSON. */
static inline void ih_fake_field(int32_t which, const char *path, int32_t kind, const char *value) {
	ih_fake_set(&ih_fake.event[which], path, kind, value);
}
static inline void ih_fake_object(int32_t which, const char *json) {
	ih_fake_copy(ih_fake.object_json[which], IH_FAKE_BODY, json, (int32_t)strlen(json));
}
static struct ih_fake_object *ih_fake_cached_object(const char *resource, const char *key) {
	const char *r = strrchr(resource, '/') ? strrchr(resource, '/') + 1 : resource; /* "v1/configmaps" is "configmaps" */
	for (int i = 0; i < IH_FAKE_MAX_OBJECTS; i++)
		if (ih_fake.cache[i].used && strcmp(ih_fake.cache[i].resource, r) == 0 && strcmp(ih_fake.cache[i].key, key) == 0) return &ih_fake.cache[i];
	return NULL;
}
/* The cached object resource key ("namespace/name" or "name"), made if
 * it is not there; set its fields with ih_fake_set. */
static struct ih_fake_object *ih_fake_cached(const char *resource, const char *key) {
	struct ih_fake_object *o = ih_fake_cached_object(resource, key);
	if (o) return o;
	for (int i = 0; i < IH_FAKE_MAX_OBJECTS; i++) {
		if (!ih_fake.cache[i].used) {
			o = &ih_fake.cache[i];
			memset(o, 0, sizeof *o);
			o->used = 1;
			const char *r = strrchr(resource, '/') ? strrchr(resource, '/') + 1 : resource;
			ih_fake_copy(o->resource, IH_FAKE_TEXT, r, (int32_t)strlen(r));
			ih_fake_copy(o->key, IH_FAKE_TEXT, key, (int32_t)strlen(key));
			return o;
		}
	}
	ih_fake_need(0, "too many cached objects");
	return NULL;
}
/* The next capabilities II call fails with code and message. */
static inline void ih_fake_answer(int32_t code, const char *message) {
	ih_fake.answer_code = code;
	ih_fake_copy(ih_fake.answer_message, IH_FAKE_TEXT, message, (int32_t)strlen(message));
}
/* Calls the plugin's ih_handle as the host would; its result. */
static inline int32_t ih_fake_handle(int32_t (*handle)(int32_t)) {
	ih_fake.error[0] = ih_fake.result[0] = 0;
	ih_fake.n_handles = 0;
	int32_t rc = handle(ih_fake.header_len);
	ih_fake.has_response = 0;
	return rc;
}

/* The default answer to a write, on the fake cache (see the top). */
static inline int32_t ih_fake_apply_write(const struct ih_fake_write *w, char *message, int32_t message_len) {
	char key[2 * IH_FAKE_TEXT + 1];
	snprintf(key, sizeof key, "%s%s%s", w->ns, *w->ns ? "/" : "", w->name);
	struct ih_fake_object *o = ih_fake_cached_object(w->resource, key);
	if (o && *w->uid && strcmp(ih_fake_get(o, "metadata.uid"), w->uid) != 0)
		return snprintf(message, (size_t)message_len, "Precondition failed: UID in precondition: %s", w->uid), IH_ERR_CONFLICT;
	if (o && *w->rv && strcmp(ih_fake_get(o, "metadata.resourceVersion"), w->rv) != 0)
		return snprintf(message, (size_t)message_len, "the object has been modified (resourceVersion %s, precondition %s)",
		                ih_fake_get(o, "metadata.resourceVersion"), w->rv), IH_ERR_CONFLICT;
	int create = w->op == IH_WRITE_CREATE || (w->op == IH_WRITE_APPLY && !(w->flags & IH_WRITE_MUST_EXIST));
	if (!o && (!create || (w->op == IH_WRITE_APPLY && *w->uid)))
		return snprintf(message, (size_t)message_len, "%s \"%s\" not found", w->resource, w->name),
		       *w->uid && w->op == IH_WRITE_APPLY ? IH_ERR_CONFLICT : IH_ERR_ABSENT;
	if (o && w->op == IH_WRITE_CREATE)
		return snprintf(message, (size_t)message_len, "%s \"%s\" already exists", w->resource, w->name), IH_ERR_EXISTS;
	if (w->op == IH_WRITE_DELETE) {
		o->used = 0;
		return 0;
	}
	if (!o) {
		o = ih_fake_cached(w->resource, key);
		ih_fake_set(o, "metadata.name", IH_KIND_STRING, w->name);
		if (*w->ns) ih_fake_set(o, "metadata.namespace", IH_KIND_STRING, w->ns);
		ih_fake_set(o, "metadata.uid", IH_KIND_STRING, "fake-uid");
	}
	char rv[32];
	snprintf(rv, sizeof rv, "%lld", (long long)++ih_fake.resource_version);
	ih_fake_set(o, "metadata.resourceVersion", IH_KIND_STRING, rv);
	return 0;
}

/* ---- the imports ---- */

int32_t ih_header_read(void *p, int32_t n) {
	return ih_fake.header_len ? ih_fake_out(ih_fake.header, ih_fake.header_len, p, n) : IH_ERR_NO_EVENT;
}
static const struct ih_fake_object *ih_fake_pick(int32_t which, int32_t *code) {
	*code = 0;
	if (which == IH_OBJECT || which == IH_OLD_OBJECT) {
		if (!ih_fake.header_len) *code = IH_ERR_NO_EVENT;
		else if (!ih_fake.event[which].used) *code = IH_ERR_ABSENT;
		return &ih_fake.event[which];
	}
	if (which < IH_FIRST_HANDLE || which - IH_FIRST_HANDLE >= ih_fake.n_handles) *code = IH_ERR_INVALID;
	return *code ? NULL : &ih_fake.handles[which - IH_FIRST_HANDLE];
}
int32_t ih_object_read(int32_t which, void *p, int32_t n) {
	int32_t code;
	ih_fake_pick(which, &code);
	if (code) return code;
	if (which > IH_OLD_OBJECT || !*ih_fake.object_json[which]) return IH_ERR_INTERNAL; /* the fake keeps fields only */
	return ih_fake_out(ih_fake.object_json[which], (int32_t)strlen(ih_fake.object_json[which]), p, n);
}
int64_t ih_field_read(int32_t which, const char *path, int32_t path_len, void *p, int32_t n) {
	char want[IH_FAKE_TEXT];
	int32_t code;
	const struct ih_fake_object *o = ih_fake_pick(which, &code);
	if (code) return code;
	IH_FAKE_TEXTOF(want, path, path_len);
	for (int i = 0; i < o->n_fields; i++)
		if (strcmp(o->fields[i].path, want) == 0)
			return (int64_t)o->fields[i].kind << 32 | (uint32_t)ih_fake_out(o->fields[i].value, (int32_t)strlen(o->fields[i].value), p, n);
	return IH_ERR_NOT_FOUND;
}
int32_t ih_config_read(void *p, int32_t n) { return ih_fake_out(ih_fake.config, (int32_t)strlen(ih_fake.config), p, n); }
int32_t ih_set_error(const char *m, int32_t n) {
	IH_FAKE_TEXTOF(ih_fake.error, m, n);
	return 0;
}
int32_t ih_log(int32_t level, const char *m, int32_t n) {
	static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
	char line[IH_FAKE_TEXT];
	if (level < 0 || level > 3) return IH_ERR_INVALID;
	ih_fake_need(ih_fake.n_logs < IH_FAKE_MAX_CALLS, "too many log lines");
	IH_FAKE_TEXTOF(line, m, n);
	snprintf(ih_fake.logs[ih_fake.n_logs++], IH_FAKE_TEXT, "%s %s", names[level], line);
	return 0;
}
int32_t ih_cache_get(const char *res, int32_t res_len, const char *ns, int32_t ns_len, const char *name, int32_t name_len) {
	char r[IH_FAKE_TEXT], n[IH_FAKE_TEXT], nm[IH_FAKE_TEXT], key[2 * IH_FAKE_TEXT + 1];
	IH_FAKE_TEXTOF(r, res, res_len);
	IH_FAKE_TEXTOF(n, ns, ns_len);
	IH_FAKE_TEXTOF(nm, name, name_len);
	snprintf(key, sizeof key, "%s%s%s", n, *n ? "/" : "", nm);
	const struct ih_fake_object *o = ih_fake_cached_object(r, key);
	if (!o) return IH_ERR_ABSENT;
	ih_fake_need(ih_fake.n_handles < IH_FAKE_MAX_CALLS, "too many handles");
	ih_fake.handles[ih_fake.n_handles] = *o;
	return IH_FIRST_HANDLE + ih_fake.n_handles++;
}
/* The keys of res in namespace ns ("" = all), sorted; selectors and
 * indexes other than "namespace" are not evaluated: IH_ERR_INVALID. */
static inline int64_t ih_fake_keys(const char *res, int32_t res_len, const char *ns, int32_t ns_len, int32_t start, void *p, int32_t len) {
	char r[IH_FAKE_TEXT], n[IH_FAKE_TEXT], page[IH_FAKE_BODY] = "";
	const char *keys[IH_FAKE_MAX_OBJECTS];
	int total = 0;
	IH_FAKE_TEXTOF(r, res, res_len);
	IH_FAKE_TEXTOF(n, ns, ns_len);
	if (start < 0) return IH_ERR_INVALID;
	for (int i = 0; i < IH_FAKE_MAX_OBJECTS; i++) {
		const struct ih_fake_object *o = &ih_fake.cache[i];
		if (o->used && strcmp(o->resource, r) == 0 && (!*n || (strncmp(o->key, n, strlen(n)) == 0 && o->key[strlen(n)] == '/'))) keys[total++] = o->key;
	}
	for (int i = 1; i < total; i++)
		for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
			const char *t = keys[j];
			keys[j] = keys[j - 1], keys[j - 1] = t;
		}
	for (int i = start; i < total; i++) strcat(strcat(page, keys[i]), "\n");
	return (int64_t)total << 32 | (uint32_t)ih_fake_out(page, (int32_t)strlen(page), p, len);
}
int64_t ih_cache_list(const char *res, int32_t res_len, const char *ns, int32_t ns_len, const char *sel, int32_t sel_len, int32_t start, void *p, int32_t len) {
	(void)sel;
	return sel_len ? IH_ERR_INVALID : ih_fake_keys(res, res_len, ns, ns_len, start, p, len);
}
int64_t ih_cache_index(const char *res, int32_t res_len, const char *index, int32_t index_len, const char *value, int32_t value_len, int32_t start, void *p, int32_t len) {
	return index_len == 9 && memcmp(index, "namespace", 9) == 0 ? ih_fake_keys(res, res_len, value, value_len, start, p, len) : IH_ERR_INVALID;
}
static inline int ih_fake_state_at(const void *key, int32_t key_len) {
	for (int i = 0; i < IH_FAKE_MAX_CALLS; i++)
		if (ih_fake.state[i].used && (int32_t)strlen(ih_fake.state[i].key) == key_len && memcmp(ih_fake.state[i].key, key, (size_t)key_len) == 0) return i;
	return -1;
}
int32_t ih_state_get(const void *key, int32_t key_len, void *p, int32_t len, int64_t *version) {
	if (key_len < 1 || key_len > IH_STATE_MAX_KEY_LEN) return IH_ERR_INVALID;
	int i = ih_fake_state_at(key, key_len);
	if (i < 0) return IH_ERR_ABSENT;
	*version = ih_fake.state[i].version;
	return ih_fake_out(ih_fake.state[i].value, ih_fake.state[i].len, p, len);
}
int64_t ih_state_set(const void *key, int32_t key_len, const void *val, int32_t val_len, int64_t if_version) {
	if (key_len < 1 || key_len >= IH_FAKE_TEXT || if_version < -1) return IH_ERR_INVALID;
	int i = ih_fake_state_at(key, key_len);
	if ((if_version == 0 && i >= 0) || (if_version > 0 && (i < 0 || ih_fake.state[i].version != if_version))) return IH_ERR_CONFLICT;
	for (int j = 0; i < 0 && j < IH_FAKE_MAX_CALLS; j++)
		if (!ih_fake.state[j].used) i = j;
	ih_fake_need(i >= 0 && val_len < IH_FAKE_TEXT, "too many or too long state values");
	ih_fake_copy(ih_fake.state[i].key, IH_FAKE_TEXT, key, key_len);
	memcpy(ih_fake.state[i].value, val, (size_t)val_len);
	ih_fake.state[i].len = val_len, ih_fake.state[i].used = 1, ih_fake.state[i].version = ++ih_fake.version;
	return ih_fake.version;
}
int32_t ih_state_delete(const void *key, int32_t key_len, int64_t if_version) {
	if (key_len < 1 || key_len > IH_STATE_MAX_KEY_LEN || if_version == 0 || if_version < -1) return IH_ERR_INVALID;
	int i = ih_fake_state_at(key, key_len);
	if (i < 0) return if_version == -1 ? IH_ERR_ABSENT : IH_ERR_CONFLICT;
	if (if_version > 0 && ih_fake.state[i].version != if_version) return IH_ERR_CONFLICT;
	ih_fake.state[i].used = 0;
	return 0;
}
int64_t ih_state_list(const void *prefix, int32_t prefix_len, const void *after, int32_t after_len, int32_t max, void *p, int32_t len) {
	(void)prefix, (void)prefix_len, (void)after, (void)after_len, (void)max, (void)p, (void)len;
	return IH_ERR_INTERNAL; /* not faked: list keys in the plugin's own test */
}
int32_t ih_metric_declare(int32_t kind, const char *decl, int32_t len) {
	char d[IH_FAKE_TEXT];
	if (kind < 0 || kind > 2) return IH_ERR_INVALID;
	IH_FAKE_TEXTOF(d, decl, len);
	for (int i = 0; i < ih_fake.n_metrics; i++)
		if (strcmp(ih_fake.metrics[i], d) == 0) return i;
	ih_fake_need(ih_fake.n_metrics < IH_FAKE_MAX_CALLS, "too many metrics");
	strcpy(ih_fake.metrics[ih_fake.n_metrics], d);
	return ih_fake.n_metrics++;
}
static inline int32_t ih_fake_metric(int32_t id, double v, int set) {
	if (id < 0 || id >= ih_fake.n_metrics || v != v) return IH_ERR_INVALID;
	ih_fake.values[id] = set ? v : ih_fake.values[id] + v;
	return 0;
}
int32_t ih_metric_add(int32_t id, double v, const char *l, int32_t n) { (void)l, (void)n; return ih_fake_metric(id, v, 0); }
int32_t ih_metric_set(int32_t id, double v, const char *l, int32_t n) { (void)l, (void)n; return ih_fake_metric(id, v, 1); }
int32_t ih_metric_observe(int32_t id, double v, const char *l, int32_t n) { (void)l, (void)n; return ih_fake_metric(id, v, 0); }
int32_t ih_result_message(char *buf, int32_t len) { return ih_fake_out(ih_fake.result, (int32_t)strlen(ih_fake.result), buf, len); }
/* The answer set with ih_fake_answer, taken: its code, its message the
 * result message; 0 when none was set. */
static inline int32_t ih_fake_answered(void) {
	int32_t c = ih_fake.answer_code;
	if (c) strcpy(ih_fake.result, ih_fake.answer_message);
	ih_fake.answer_code = 0;
	return c;
}
int32_t ih_k8s_write(int32_t op, const char *res, int32_t res_len, const char *ns, int32_t ns_len, const char *name, int32_t name_len,
                     const char *sub, int32_t sub_len, const char *body, int32_t body_len, const char *uid, int32_t uid_len,
                     const char *rv, int32_t rv_len, int32_t flags) {
	ih_fake_need(ih_fake.n_writes < IH_FAKE_MAX_CALLS, "too many writes");
	struct ih_fake_write *w = &ih_fake.writes[ih_fake.n_writes++];
	w->op = op, w->flags = flags;
	IH_FAKE_TEXTOF(w->resource, res, res_len);
	IH_FAKE_TEXTOF(w->ns, ns, ns_len);
	IH_FAKE_TEXTOF(w->name, name, name_len);
	IH_FAKE_TEXTOF(w->sub, sub, sub_len);
	IH_FAKE_TEXTOF(w->body, body, body_len);
	IH_FAKE_TEXTOF(w->uid, uid, uid_len);
	IH_FAKE_TEXTOF(w->rv, rv, rv_len);
	ih_fake.result[0] = 0;
	if (op < IH_WRITE_CREATE || op > IH_WRITE_DELETE) return snprintf(ih_fake.result, sizeof ih_fake.result, "unknown op %d", op), IH_ERR_INVALID;
	if (flags & ~(IH_WRITE_FORCE | IH_WRITE_MUST_EXIST) || (flags && op != IH_WRITE_APPLY))
		return snprintf(ih_fake.result, sizeof ih_fake.result, "flags %#x on op %d", flags, op), IH_ERR_INVALID;
	if (!*w->name && op != IH_WRITE_CREATE) return snprintf(ih_fake.result, sizeof ih_fake.result, "no name"), IH_ERR_INVALID;
	int32_t c = ih_fake_answered();
	if (c) return c;
	c = (ih_fake.on_write ? ih_fake.on_write : ih_fake_apply_write)(w, ih_fake.result, (int32_t)sizeof ih_fake.result);
	if (c < 0 || op == IH_WRITE_DELETE) return c;
	char key[2 * IH_FAKE_TEXT + 1];
	snprintf(key, sizeof key, "%s%s%s", w->ns, *w->ns ? "/" : "", w->name);
	const struct ih_fake_object *o = ih_fake_cached_object(w->resource, key);
	ih_fake_need(ih_fake.n_handles < IH_FAKE_MAX_CALLS, "too many handles");
	if (o) ih_fake.handles[ih_fake.n_handles] = *o;
	else memset(&ih_fake.handles[ih_fake.n_handles], 0, sizeof ih_fake.handles[0]);
	return IH_FIRST_HANDLE + ih_fake.n_handles++;
}
int32_t ih_event_record(int32_t which, int32_t type, const char *reason, int32_t reason_len, const char *msg, int32_t msg_len) {
	int32_t code;
	ih_fake.result[0] = 0;
	if (type != IH_KUBE_EVENT_NORMAL && type != IH_KUBE_EVENT_WARNING) return IH_ERR_INVALID;
	ih_fake_pick(which, &code);
	if (code) return code;
	if (reason_len < 1 || reason_len > IH_MAX_EVENT_REASON) return IH_ERR_INVALID;
	for (int i = 0; i < reason_len; i++)
		if (!((reason[i] >= 'a' && reason[i] <= 'z') || (reason[i] >= 'A' && reason[i] <= 'Z') || (reason[i] >= '0' && reason[i] <= '9') || strchr("_-.:", reason[i])))
			return snprintf(ih_fake.result, sizeof ih_fake.result, "bad reason"), IH_ERR_INVALID;
	if (msg_len > IH_MAX_EVENT_MESSAGE) return IH_ERR_TOO_LARGE;
	if ((code = ih_fake_answered())) return code;
	ih_fake_need(ih_fake.n_events < IH_FAKE_MAX_CALLS, "too many Events");
	struct ih_fake_kube_event *e = &ih_fake.events[ih_fake.n_events++];
	e->which = which, e->type = type;
	IH_FAKE_TEXTOF(e->reason, reason, reason_len);
	IH_FAKE_TEXTOF(e->message, msg, msg_len);
	return 0;
}
int32_t ih_http_request(const char *up, int32_t up_len, const char *method, int32_t method_len, const char *path, int32_t path_len,
                        const char *headers, int32_t headers_len, const void *body, int32_t body_len) {
	ih_fake_need(ih_fake.n_http < IH_FAKE_MAX_CALLS, "too many HTTP requests");
	struct ih_fake_http_request *r = &ih_fake.http[ih_fake.n_http++];
	IH_FAKE_TEXTOF(r->upstream, up, up_len);
	IH_FAKE_TEXTOF(r->method, method, method_len);
	IH_FAKE_TEXTOF(r->path, path, path_len);
	IH_FAKE_TEXTOF(r->header, headers, headers_len);
	IH_FAKE_TEXTOF(r->body, (const char *)body, body_len);
	ih_fake.result[0] = 0;
	ih_fake.has_response = 0;
	int32_t c = ih_fake_answered();
	if (c) return c;
	if (!ih_fake.on_http) return snprintf(ih_fake.result, sizeof ih_fake.result, "upstream \"%s\" is not granted (fake: set ih_fake.on_http)", r->upstream), IH_ERR_DENIED;
	memset(&ih_fake.response, 0, sizeof ih_fake.response);
	ih_fake.on_http(r, &ih_fake.response);
	if (ih_fake.response.code < 0) return strcpy(ih_fake.result, ih_fake.response.message), ih_fake.response.code;
	ih_fake.has_response = 1;
	return ih_fake.response.status ? ih_fake.response.status : 200;
}
int32_t ih_http_response_read(int32_t part, void *p, int32_t len) {
	if (part != IH_HTTP_BODY && part != IH_HTTP_HEADER) return IH_ERR_INVALID;
	if (!ih_fake.has_response) return IH_ERR_ABSENT;
	const char *v = part == IH_HTTP_BODY ? ih_fake.response.body : ih_fake.response.header;
	return ih_fake_out(v, (int32_t)strlen(v), p, len);
}

/* ---- controller mode (ABI.md section 18) ---- */
#define IH_FAKE_MAX_OWNS 8
struct ih_fake_child { int used; char primary[IH_FAKE_TEXT], resource[IH_FAKE_TEXT], kind[IH_FAKE_TEXT], key[IH_FAKE_TEXT]; };
static struct {
	char resource[IH_FAKE_TEXT], finalizer[IH_FAKE_TEXT]; /* controller.for, controller.finalizer */
	char owns[IH_FAKE_MAX_OWNS][2][IH_FAKE_TEXT]; /* resource, kind */
	int n_owns;
	int reconciling;
	char primary[IH_FAKE_TEXT], ns[IH_FAKE_TEXT];
	int64_t requeue; /* -1: not asked in this call */
	struct ih_fake_child children[IH_FAKE_MAX_OBJECTS];
	char applied[IH_FAKE_MAX_CALLS][IH_FAKE_TEXT]; /* "resource ns/name", the last call's */
	int n_applied;
	char pruned[IH_FAKE_MAX_CALLS][IH_FAKE_TEXT];
	int n_pruned;
	char status[IH_FAKE_BODY]; /* the last status_apply body */
	int n_status;
	struct { char kind[IH_FAKE_TEXT], key[IH_FAKE_TEXT], error[IH_FAKE_TEXT]; } failures[8]; /* ih_fake_fail_child */
	int n_failures;
	int64_t now_ms;
	struct { int used; char key[IH_FAKE_TEXT]; int64_t due; } timers[IH_FAKE_MAX_CALLS];
} ih_fake_ctl;

/* A fresh controller loop over the fake cache: resource is controller.for,
 * finalizer controller.finalizer ("" none). */
static inline void ih_fake_controller(const char *resource, const char *finalizer) {
	memset(&ih_fake_ctl, 0, sizeof ih_fake_ctl);
	IH_FAKE_TEXTOF(ih_fake_ctl.resource, resource, (int32_t)strlen(resource));
	IH_FAKE_TEXTOF(ih_fake_ctl.finalizer, finalizer, (int32_t)strlen(finalizer));
}
/* controller.owns: children of kind are objects of resource. */
static inline void ih_fake_owns(const char *resource, const char *kind) {
	ih_fake_need(ih_fake_ctl.n_owns < IH_FAKE_MAX_OWNS, "too many owned resources");
	IH_FAKE_TEXTOF(ih_fake_ctl.owns[ih_fake_ctl.n_owns][0], resource, (int32_t)strlen(resource));
	IH_FAKE_TEXTOF(ih_fake_ctl.owns[ih_fake_ctl.n_owns++][1], kind, (int32_t)strlen(kind));
}
/* children_apply fails the child kind key ("ns/name") with error ("" clears). */
static inline void ih_fake_fail_child(const char *kind, const char *key, const char *error) {
	for (int i = 0; i < ih_fake_ctl.n_failures; i++)
		if (!strcmp(ih_fake_ctl.failures[i].kind, kind) && !strcmp(ih_fake_ctl.failures[i].key, key)) {
			IH_FAKE_TEXTOF(ih_fake_ctl.failures[i].error, error, (int32_t)strlen(error));
			return;
		}
	ih_fake_need(ih_fake_ctl.n_failures < 8, "too many child failures");
	int i = ih_fake_ctl.n_failures++;
	IH_FAKE_TEXTOF(ih_fake_ctl.failures[i].kind, kind, (int32_t)strlen(kind));
	IH_FAKE_TEXTOF(ih_fake_ctl.failures[i].key, key, (int32_t)strlen(key));
	IH_FAKE_TEXTOF(ih_fake_ctl.failures[i].error, error, (int32_t)strlen(error));
}

/* A JSON scanner, for the children's identity. */
static inline int32_t ih_fake_json_ws(const char *s, int32_t n, int32_t i) {
	while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) i++;
	return i;
}
/* The index after the value at i; n when it does not end. */
static inline int32_t ih_fake_json_skip(const char *s, int32_t n, int32_t i) {
	int depth = 0, str = 0;
	for (; i < n; i++) {
		char c = s[i];
		if (str) {
			if (c == '\\') i++;
			else if (c == '"' && (str = 0, depth == 0)) return i + 1;
		} else if (c == '"') str = 1;
		else if (c == '{' || c == '[') depth++;
		else if (c == '}' || c == ']') {
			if (--depth == 0) return i + 1;
			if (depth < 0) return i;
		} else if (depth == 0 && (c == ',' || c == ' ' || c == '\n')) return i;
	}
	return n;
}
/* The value of member key of the object at obj ('{'): its index, or -1. */
static inline int32_t ih_fake_json_member(const char *s, int32_t n, int32_t obj, const char *key) {
	int32_t i = ih_fake_json_ws(s, n, obj);
	if (i >= n || s[i] != '{') return -1;
	i = ih_fake_json_ws(s, n, i + 1);
	size_t kl = strlen(key);
	while (i < n && s[i] == '"') {
		int32_t k = i, e = ih_fake_json_skip(s, n, i);
		int32_t v = ih_fake_json_ws(s, n, ih_fake_json_ws(s, n, e) + 1);
		if ((size_t)(e - k - 2) == kl && !memcmp(s + k + 1, key, kl)) return v;
		i = ih_fake_json_ws(s, n, ih_fake_json_skip(s, n, v));
		if (i < n && s[i] == ',') i = ih_fake_json_ws(s, n, i + 1);
	}
	return -1;
}
/* The string at v (escapes kept as written) into out; "" when not a string. */
static inline void ih_fake_json_text(const char *s, int32_t n, int32_t v, char *out, size_t cap) {
	out[0] = 0;
	if (v < 0 || v >= n || s[v] != '"') return;
	int32_t e = ih_fake_json_skip(s, n, v);
	ih_fake_copy(out, cap, s + v + 1, e - v - 2);
}

static inline void ih_fake_prune(const char *primary, const char keep[][IH_FAKE_TEXT * 2], int n_keep) {
	for (int i = 0; i < IH_FAKE_MAX_OBJECTS; i++) {
		struct ih_fake_child *c = &ih_fake_ctl.children[i];
		if (!c->used || strcmp(c->primary, primary)) continue;
		char id[IH_FAKE_TEXT * 2];
		snprintf(id, sizeof id, "%s %s", c->resource, c->key);
		int kept = 0;
		for (int k = 0; k < n_keep && !kept; k++) kept = !strcmp(keep[k], id);
		if (kept) continue;
		struct ih_fake_object *o = ih_fake_cached_object(c->resource, c->key);
		if (o) o->used = 0;
		c->used = 0;
		ih_fake_need(ih_fake_ctl.n_pruned < IH_FAKE_MAX_CALLS, "too many pruned children");
		IH_FAKE_TEXTOF(ih_fake_ctl.pruned[ih_fake_ctl.n_pruned++], id, (int32_t)strlen(id));
	}
}

int32_t ih_children_apply(const char *p, int32_t n) {
	static char keep[IH_FAKE_MAX_OBJECTS][IH_FAKE_TEXT * 2];
	int n_keep = 0, failed = 0;
	ih_fake.result[0] = 0;
	if (!ih_fake_ctl.reconciling) return IH_ERR_NO_EVENT;
	int32_t i = ih_fake_json_ws(p, n, 0);
	if (i >= n || p[i] != '[') return snprintf(ih_fake.result, sizeof ih_fake.result, "children_apply: the body is not a JSON array"), IH_ERR_INVALID;
	/* Checked whole first: an invalid or denied set applies nothing. */
	for (int pass = 0; pass < 2; pass++) {
		for (int32_t e = ih_fake_json_ws(p, n, i + 1), k = 0; e < n && p[e] == '{'; k++) {
			char api[IH_FAKE_TEXT], kind[IH_FAKE_TEXT], name[IH_FAKE_TEXT], ns[IH_FAKE_TEXT], key[IH_FAKE_TEXT * 2 + 1];
			int32_t meta = ih_fake_json_member(p, n, e, "metadata");
			ih_fake_json_text(p, n, ih_fake_json_member(p, n, e, "apiVersion"), api, sizeof api);
			ih_fake_json_text(p, n, ih_fake_json_member(p, n, e, "kind"), kind, sizeof kind);
			ih_fake_json_text(p, n, meta < 0 ? -1 : ih_fake_json_member(p, n, meta, "name"), name, sizeof name);
			ih_fake_json_text(p, n, meta < 0 ? -1 : ih_fake_json_member(p, n, meta, "namespace"), ns, sizeof ns);
			e = ih_fake_json_ws(p, n, ih_fake_json_skip(p, n, e));
			if (e < n && p[e] == ',') e = ih_fake_json_ws(p, n, e + 1);
			if (!*api || !*kind || !*name)
				return snprintf(ih_fake.result, sizeof ih_fake.result, "children_apply: child %d has no apiVersion, kind or metadata.name", k), IH_ERR_INVALID;
			const char *res = NULL;
			for (int o = 0; o < ih_fake_ctl.n_owns; o++)
				if (!strcmp(ih_fake_ctl.owns[o][1], kind)) res = ih_fake_ctl.owns[o][0];
			if (!res) return snprintf(ih_fake.result, sizeof ih_fake.result, "children_apply: %s is not of a resource in controller.owns", kind), IH_ERR_DENIED;
			if (pass == 0) continue;
			snprintf(key, sizeof key, "%s/%s", *ns ? ns : ih_fake_ctl.ns, name);
			ih_fake_need(n_keep < IH_FAKE_MAX_OBJECTS, "too many children");
			snprintf(keep[n_keep++], sizeof keep[0], "%s %s", res, key);
			const char *err = NULL;
			for (int f = 0; f < ih_fake_ctl.n_failures; f++)
				if (!strcmp(ih_fake_ctl.failures[f].kind, kind) && !strcmp(ih_fake_ctl.failures[f].key, key) && *ih_fake_ctl.failures[f].error)
					err = ih_fake_ctl.failures[f].error;
			if (err) {
				size_t l = strlen(ih_fake.result);
				snprintf(ih_fake.result + l, sizeof ih_fake.result - l, "%s%s %s: %s", failed++ ? "\n" : "", kind, key, err);
				continue;
			}
			struct ih_fake_object *o = ih_fake_cached(res, key);
			ih_fake_set(o, "apiVersion", IH_KIND_STRING, api);
			ih_fake_set(o, "kind", IH_KIND_STRING, kind);
			ih_fake_set(o, "metadata.name", IH_KIND_STRING, name);
			ih_fake_set(o, "metadata.namespace", IH_KIND_STRING, *ns ? ns : ih_fake_ctl.ns);
			ih_fake_set(o, "metadata.annotations[\"controller.informer-host.io/owner\"]", IH_KIND_STRING, ih_fake_ctl.primary);
			int known = 0;
			for (int c = 0; c < IH_FAKE_MAX_OBJECTS && !known; c++)
				known = ih_fake_ctl.children[c].used && !strcmp(ih_fake_ctl.children[c].primary, ih_fake_ctl.primary) &&
				        !strcmp(ih_fake_ctl.children[c].resource, res) && !strcmp(ih_fake_ctl.children[c].key, key);
			for (int c = 0; c < IH_FAKE_MAX_OBJECTS && !known; c++) {
				struct ih_fake_child *ch = &ih_fake_ctl.children[c];
				if (ch->used) continue;
				ch->used = known = 1;
				IH_FAKE_TEXTOF(ch->primary, ih_fake_ctl.primary, (int32_t)strlen(ih_fake_ctl.primary));
				IH_FAKE_TEXTOF(ch->resource, res, (int32_t)strlen(res));
				IH_FAKE_TEXTOF(ch->kind, kind, (int32_t)strlen(kind));
				IH_FAKE_TEXTOF(ch->key, key, (int32_t)strlen(key));
			}
			ih_fake_need(known, "too many children");
			ih_fake_need(ih_fake_ctl.n_applied < IH_FAKE_MAX_CALLS, "too many applied children");
			snprintf(ih_fake_ctl.applied[ih_fake_ctl.n_applied++], IH_FAKE_TEXT, "%s %s", res, key);
		}
	}
	ih_fake_prune(ih_fake_ctl.primary, (const char(*)[IH_FAKE_TEXT * 2])keep, n_keep);
	return failed;
}
int32_t ih_status_apply(const char *p, int32_t n) {
	ih_fake.result[0] = 0;
	if (!ih_fake_ctl.reconciling) return IH_ERR_NO_EVENT;
	if (!ih_fake_cached_object(ih_fake_ctl.resource, ih_fake_ctl.primary)) return IH_ERR_ABSENT;
	int32_t i = ih_fake_json_ws(p, n, 0);
	if (i >= n || p[i] != '{') return snprintf(ih_fake.result, sizeof ih_fake.result, "status_apply: the body is not a JSON object"), IH_ERR_INVALID;
	IH_FAKE_TEXTOF(ih_fake_ctl.status, p, n);
	ih_fake_ctl.n_status++;
	return 0;
}
int32_t ih_reconcile_requeue_after(int64_t millis) {
	if (!ih_fake_ctl.reconciling) return IH_ERR_NO_EVENT;
	if (millis < 0 || millis > 366LL * 86400000) return IH_ERR_INVALID;
	ih_fake_ctl.requeue = millis;
	return 0;
}

/* Adds finalizer f to the object's "metadata.finalizers" (a JSON array
 * of strings), or takes it out. */
static inline void ih_fake_finalizer(struct ih_fake_object *o, const char *f, int add) {
	char quoted[IH_FAKE_TEXT + 2], out[IH_FAKE_TEXT] = "[";
	const char *cur = ih_fake_get(o, "metadata.finalizers");
	size_t ql = (size_t)snprintf(quoted, sizeof quoted, "\"%s\"", f);
	int n = 0, has = 0;
	for (const char *q = strchr(cur, '"'), *e; q && (e = strchr(q + 1, '"')); q = strchr(e + 1, '"')) {
		size_t l = (size_t)(e - q + 1);
		int same = l == ql && !memcmp(q, quoted, l);
		has |= same;
		if (!same) snprintf(out + strlen(out), sizeof out - strlen(out), "%s%.*s", n++ ? "," : "", (int)l, q);
	}
	if (add == has) return;
	if (add) snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", n ? "," : "", quoted);
	strcat(out, "]");
	ih_fake_set(o, "metadata.finalizers", IH_KIND_ARRAY, out);
}

/* One reconcile of ns/name through the plugin's ih_reconcile export, as
 * the host makes it (flags: IH_FLAG_INITIAL_LIST or 0); its answer. */
static inline int32_t ih_fake_reconcile(int32_t (*reconcile)(int32_t), const char *ns, const char *name, int32_t flags) {
	char key[2 * IH_FAKE_TEXT + 1];
	snprintf(key, sizeof key, "%s%s%s", ns, *ns ? "/" : "", name);
	struct ih_fake_object *o = ih_fake_cached_object(ih_fake_ctl.resource, key);
	int deleting = o && *ih_fake_get(o, "metadata.deletionTimestamp");
	if (o && !deleting && *ih_fake_ctl.finalizer) ih_fake_finalizer(o, ih_fake_ctl.finalizer, 1);
	ih_fake_reset();
	ih_fake_event(IH_EVENT_RECONCILE, flags | (o ? 0 : IH_FLAG_ABSENT) | (deleting ? IH_FLAG_DELETING : 0), ih_fake_ctl.resource, ns, name);
	if (o) ih_fake.event[IH_OBJECT] = *o;
	IH_FAKE_TEXTOF(ih_fake_ctl.primary, key, (int32_t)strlen(key));
	IH_FAKE_TEXTOF(ih_fake_ctl.ns, ns, (int32_t)strlen(ns));
	ih_fake_ctl.requeue = -1, ih_fake_ctl.n_applied = ih_fake_ctl.n_pruned = ih_fake_ctl.n_status = 0;
	ih_fake_ctl.reconciling = 1;
	int32_t rc = ih_fake_handle(reconcile);
	ih_fake_ctl.reconciling = 0;
	ih_fake.header_len = 0;
	int t = 0;
	while (t < IH_FAKE_MAX_CALLS && !(ih_fake_ctl.timers[t].used && !strcmp(ih_fake_ctl.timers[t].key, key))) t++;
	if (rc == IH_OK || rc == IH_DROP) {
		if (t < IH_FAKE_MAX_CALLS) ih_fake_ctl.timers[t].used = 0;
		if (rc == IH_OK && ih_fake_ctl.requeue > 0) {
			for (t = 0; ih_fake_ctl.timers[t].used; t++) ih_fake_need(t + 1 < IH_FAKE_MAX_CALLS, "too many timers");
			ih_fake_ctl.timers[t].used = 1;
			ih_fake_ctl.timers[t].due = ih_fake_ctl.now_ms + ih_fake_ctl.requeue;
			IH_FAKE_TEXTOF(ih_fake_ctl.timers[t].key, key, (int32_t)strlen(key));
		}
	}
	if (rc == IH_OK && !o) ih_fake_prune(key, NULL, 0);
	if (rc == IH_OK && deleting && *ih_fake_ctl.finalizer) {
		ih_fake_finalizer(o, ih_fake_ctl.finalizer, 0);
		if (!strcmp(ih_fake_get(o, "metadata.finalizers"), "[]")) o->used = 0; /* the apiserver deletes it */
	}
	return rc;
}
/* A user's delete: with finalizers the object gets a deletionTimestamp,
 * without it is gone. */
static inline void ih_fake_delete(const char *ns, const char *name) {
	char key[2 * IH_FAKE_TEXT + 1];
	snprintf(key, sizeof key, "%s%s%s", ns, *ns ? "/" : "", name);
	struct ih_fake_object *o = ih_fake_cached_object(ih_fake_ctl.resource, key);
	if (!o) return;
	const char *f = ih_fake_get(o, "metadata.finalizers");
	if (!*f || !strcmp(f, "[]")) o->used = 0;
	else ih_fake_set(o, "metadata.deletionTimestamp", IH_KIND_STRING, "2026-01-01T00:00:00Z");
}
/* How long until ns/name's requeue fires; -1 when none is pending. */
static inline int64_t ih_fake_requeue(const char *ns, const char *name) {
	char key[2 * IH_FAKE_TEXT + 1];
	snprintf(key, sizeof key, "%s%s%s", ns, *ns ? "/" : "", name);
	for (int t = 0; t < IH_FAKE_MAX_CALLS; t++)
		if (ih_fake_ctl.timers[t].used && !strcmp(ih_fake_ctl.timers[t].key, key)) return ih_fake_ctl.timers[t].due - ih_fake_ctl.now_ms;
	return -1;
}
/* Moves the fake clock on by ms and reconciles every key whose requeue
 * fell due; how many. */
static inline int ih_fake_advance(int64_t ms, int32_t (*reconcile)(int32_t)) {
	int fired = 0;
	ih_fake_ctl.now_ms += ms;
	for (int t = 0; t < IH_FAKE_MAX_CALLS; t++) {
		if (!ih_fake_ctl.timers[t].used || ih_fake_ctl.timers[t].due > ih_fake_ctl.now_ms) continue;
		char key[IH_FAKE_TEXT], *slash;
		strcpy(key, ih_fake_ctl.timers[t].key);
		ih_fake_ctl.timers[t].used = 0;
		slash = strchr(key, '/');
		if (slash) *slash = 0;
		ih_fake_reconcile(reconcile, slash ? key : "", slash ? slash + 1 : key, 0);
		fired++;
	}
	return fired;
}
/* The children the host applied for ns/name and has not pruned. */
static inline int ih_fake_children(const char *ns, const char *name) {
	char key[2 * IH_FAKE_TEXT + 1];
	int n = 0;
	snprintf(key, sizeof key, "%s%s%s", ns, *ns ? "/" : "", name);
	for (int i = 0; i < IH_FAKE_MAX_OBJECTS; i++) n += ih_fake_ctl.children[i].used && !strcmp(ih_fake_ctl.children[i].primary, key);
	return n;
}

#endif
