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
 * Sizes are fixed (the IH_FAKE_MAX_* below): a test past them aborts. */
#ifndef INFORMER_HOST_FAKE_H
#define INFORMER_HOST_FAKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "informer_host.h"

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

#endif
