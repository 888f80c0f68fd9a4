/*
 * informer_host_reconcile.h: controller mode (ABI v1.5, abi/ABI.md section
 * 18) for C: the reconciler shape over informer_host.h, with a small JSON
 * writer so that children and status are built without hand-written JSON.
 * Needs only <stdint.h> (no libc). The plugin defines its reconcile
 * function and names it:
 *
 *     #include "informer_host_reconcile.h"
 *     IH_ABI_V1_MARKER();
 *     static int32_t reconcile(const ih_request *req, ih_outcome *out) {
 *         if (!req->exists || req->deleting) { ih_children_none(out); return IH_OK; }
 *         ih_json *c = ih_child_begin(out, "v1", "ConfigMap");
 *         ih_json_member_object(c, "metadata");
 *         ih_json_member_str(c, "name", "copy");
 *         ih_json_end(c);                           // metadata
 *         ih_child_end(out);
 *         ih_set_condition(out, "Ready", "True", "Copied", "");
 *         ih_requeue_after(out, 60000);
 *         return IH_OK;                              // or IH_RETRY, IH_DROP, IH_ERROR (ih_set_error)
 *     }
 *     IH_RECONCILER(reconcile);   // the ih_reconcile export
 *     IH_NOT_A_HANDLER();         // the ih_handle every plugin exports; never called in controller mode
 *
 * After an IH_OK answer the kit carries the outcome out: children_apply
 * with the complete set (when the function gave one: ih_children_none or
 * ih_child_begin), status_apply with the status fields and conditions
 * (when it gave any; after another answer too, so a failure can be a
 * condition), reconcile_requeue_after (always: 0 clears). A child the host could not
 * apply turns the answer into IH_ERROR with the host's line for each
 * (`<kind> <ns>/<name>: <error>`), after the status was written, so the key
 * is retried with backoff; a plugin that acts on failed children itself
 * calls ih_children_apply directly (its return is the count of failures,
 * ih_result_message the lines).
 *
 * Buffers are static, sized by IH_RECONCILE_CHILDREN_BUF and
 * IH_RECONCILE_STATUS_BUF (define them before the include to change
 * them); an outcome over them is IH_ERROR naming the macro.
 */
#ifndef INFORMER_HOST_RECONCILE_H
#define INFORMER_HOST_RECONCILE_H

#include <stdint.h>
#include "informer_host.h"

/* The v1.5 imports (ih_reconcile_requeue_after, ih_children_apply,
 * ih_status_apply), IH_EVENT_RECONCILE and the IH_FLAG_* bits are
 * informer_host.h's. */

#ifndef IH_RECONCILE_CHILDREN_BUF
#define IH_RECONCILE_CHILDREN_BUF 65536
#endif
#ifndef IH_RECONCILE_STATUS_BUF
#define IH_RECONCILE_STATUS_BUF 8192
#endif
#define IH_RECONCILE_HEADER_BUF 4096
#define IH_MAX_CONDITIONS 8
#define IH_JSON_MAX_DEPTH 32

/* ---- A JSON writer over a fixed buffer. Values and members are written
 * in order; commas and closing brackets are the writer's. A write past
 * the buffer sets overflow and writes nothing more. */
typedef struct {
	char *buf;
	int32_t cap, len, depth;
	int overflow;
	char closer[IH_JSON_MAX_DEPTH]; /* '}' or ']' per open level */
	uint8_t count[IH_JSON_MAX_DEPTH]; /* values written at the level (0, 1: more than none) */
	int after_key;
} ih_json;

static inline int32_t ih_strlen(const char *s) {
	int32_t n = 0;
	while (s && s[n]) n++;
	return n;
}

static inline void ih_json_init(ih_json *j, char *buf, int32_t cap) {
	j->buf = buf, j->cap = cap, j->len = 0, j->depth = 0, j->overflow = 0, j->after_key = 0;
	j->count[0] = 0;
}
static inline void ih_json_raw(ih_json *j, const char *s, int32_t n) {
	if (j->overflow || n > j->cap - j->len) {
		j->overflow = 1;
		return;
	}
	for (int32_t i = 0; i < n; i++) j->buf[j->len++] = s[i];
}
/* Before a value or a member name: the comma, unless it follows a name. */
static inline void ih_json_sep(ih_json *j) {
	if (j->after_key) {
		j->after_key = 0;
		return;
	}
	if (j->count[j->depth]) ih_json_raw(j, ",", 1);
	j->count[j->depth] = 1;
}
static inline void ih_json_quoted(ih_json *j, const char *s, int32_t n) {
	static const char hex[] = "0123456789abcdef";
	ih_json_raw(j, "\"", 1);
	for (int32_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			ih_json_raw(j, e, 2);
		} else if (c < 0x20) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			ih_json_raw(j, e, 6);
		} else {
			ih_json_raw(j, (const char *)&s[i], 1);
		}
	}
	ih_json_raw(j, "\"", 1);
}
static inline void ih_json_strn(ih_json *j, const char *s, int32_t n) {
	ih_json_sep(j);
	ih_json_quoted(j, s, n);
}
static inline void ih_json_str(ih_json *j, const char *s) { ih_json_strn(j, s, ih_strlen(s)); }
/* The decimal digits of v into d (at least 21 bytes); their count. */
static inline int32_t ih_itoa(int64_t v, char *d) {
	char t[21];
	int32_t n = 0, k = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do t[n++] = (char)('0' + u % 10), u /= 10; while (u);
	if (v < 0) d[k++] = '-';
	while (n) d[k++] = t[--n];
	return k;
}
static inline void ih_json_int(ih_json *j, int64_t v) {
	char d[21];
	ih_json_sep(j);
	ih_json_raw(j, d, ih_itoa(v, d));
}
static inline void ih_json_bool(ih_json *j, int b) {
	ih_json_sep(j);
	ih_json_raw(j, b ? "true" : "false", b ? 4 : 5);
}
static inline void ih_json_open(ih_json *j, char open, char close) {
	ih_json_sep(j);
	if (j->depth + 1 >= IH_JSON_MAX_DEPTH) {
		j->overflow = 1;
		return;
	}
	ih_json_raw(j, &open, 1);
	j->closer[++j->depth] = close;
	j->count[j->depth] = 0;
}
static inline void ih_json_object(ih_json *j) { ih_json_open(j, '{', '}'); }
static inline void ih_json_array(ih_json *j) { ih_json_open(j, '[', ']'); }
/* Closes the innermost open object or array. */
static inline void ih_json_end(ih_json *j) {
	if (j->depth == 0) return;
	ih_json_raw(j, &j->closer[j->depth--], 1);
}
/* A member name; the next value written is its value. */
static inline void ih_json_key(ih_json *j, const char *k) {
	ih_json_sep(j);
	ih_json_quoted(j, k, ih_strlen(k));
	ih_json_raw(j, ":", 1);
	j->after_key = 1;
}
static inline void ih_json_member_str(ih_json *j, const char *k, const char *v) { ih_json_key(j, k), ih_json_str(j, v); }
static inline void ih_json_member_int(ih_json *j, const char *k, int64_t v) { ih_json_key(j, k), ih_json_int(j, v); }
static inline void ih_json_member_bool(ih_json *j, const char *k, int v) { ih_json_key(j, k), ih_json_bool(j, v); }
static inline void ih_json_member_object(ih_json *j, const char *k) { ih_json_key(j, k), ih_json_object(j); }
static inline void ih_json_member_array(ih_json *j, const char *k) { ih_json_key(j, k), ih_json_array(j); }

/* ---- The reconciler. */

/* The key to reconcile; the object, when the cache has it, is read with
 * ih_field_read(IH_OBJECT, ...) and ih_object_read(IH_OBJECT, ...) (both
 * IH_ERR_ABSENT when !exists). ns and name point into header (not
 * NUL-terminated). */
typedef struct {
	const uint8_t *header;
	const char *ns, *name;
	int32_t ns_len, name_len;
	int exists;   /* the cache has the object (header flag IH_FLAG_ABSENT unset) */
	int deleting; /* its deletionTimestamp is set: clean up, answer IH_OK, the host removes the finalizer */
	int initial;  /* the replay after a (re)start or reload */
} ih_request;

/* A condition; the strings must live until the reconcile function
 * returns (literals, or buffers of the plugin's). */
typedef struct {
	const char *type, *status, *reason, *message;
} ih_condition;

/* What the reconcile function wants; it starts empty: children left
 * alone, no status, no requeue. */
typedef struct {
	int64_t requeue_after_ms;
	int has_children, has_status, in_child;
	ih_json children, status;
	ih_condition conditions[IH_MAX_CONDITIONS];
	int n_conditions;
} ih_outcome;

/* The complete set is empty: every child the host applied for the key is
 * pruned. Also what ih_child_begin starts from. */
static inline void ih_children_none(ih_outcome *o) {
	static char buf[IH_RECONCILE_CHILDREN_BUF];
	if (o->has_children) return;
	o->has_children = 1;
	ih_json_init(&o->children, buf, sizeof buf);
	ih_json_array(&o->children);
}
/* Adds a child of apiVersion/kind: the object is open, with those two
 * members written; write metadata (name, optional namespace, labels) and
 * the rest with the ih_json_* functions, then ih_child_end. */
static inline ih_json *ih_child_begin(ih_outcome *o, const char *api_version, const char *kind) {
	ih_children_none(o);
	ih_json *j = &o->children;
	ih_json_object(j);
	ih_json_member_str(j, "apiVersion", api_version);
	ih_json_member_str(j, "kind", kind);
	o->in_child = j->depth;
	return j;
}
/* Closes the child ih_child_begin opened (and whatever is left open in it). */
static inline void ih_child_end(ih_outcome *o) {
	while (o->children.depth >= o->in_child && o->children.depth > 1) ih_json_end(&o->children);
}
/* The status object, open for fields other than conditions. */
static inline ih_json *ih_status_begin(ih_outcome *o) {
	static char buf[IH_RECONCILE_STATUS_BUF];
	if (!o->has_status) {
		o->has_status = 1;
		ih_json_init(&o->status, buf, sizeof buf);
		ih_json_object(&o->status);
	}
	return &o->status;
}
static inline int ih_streq(const char *a, const char *b) {
	while (*a && *a == *b) a++, b++;
	return *a == *b;
}
/* Adds the condition, or replaces the one of its type (as apimachinery's
 * meta.SetStatusCondition); status "True", "False" or "Unknown". */
static inline void ih_set_condition(ih_outcome *o, const char *type, const char *status, const char *reason, const char *message) {
	ih_status_begin(o);
	int i = 0;
	while (i < o->n_conditions && !ih_streq(o->conditions[i].type, type)) i++;
	if (i == IH_MAX_CONDITIONS) return;
	if (i == o->n_conditions) o->n_conditions++;
	o->conditions[i] = (ih_condition){type, status, reason, message};
}
static inline void ih_requeue_after(ih_outcome *o, int64_t millis) { o->requeue_after_ms = millis; }

/* The code's name in ABI.md: "ERR_DENIED". */
static inline const char *ih_error_name(int32_t code) {
	static const char *const names[] = {"ERR_ABSENT", "ERR_NOT_FOUND", "ERR_BAD_PATH", "ERR_BOUNDS", "ERR_INVALID",
		"ERR_NO_EVENT", "ERR_INTERNAL", "ERR_DENIED", "ERR_CONFLICT", "ERR_QUOTA", "ERR_EXISTS", "ERR_FORBIDDEN",
		"ERR_UNPROCESSABLE", "ERR_RATE_LIMITED", "ERR_TIMEOUT", "ERR_UNAVAILABLE", "ERR_TOO_LARGE", "ERR_CANCELED",
		"ERR_FIELD_CONFLICT"};
	return code <= -1 && code >= -19 ? names[-code - 1] : "ERR_UNKNOWN";
}

/* Sets the answer's message: what, then the host's result message with
 * its lines joined by "; ". */
static inline void ih_reconcile_fail(ih_json *m, const char *what) {
	static char rm[2048];
	int32_t n = ih_result_message(rm, sizeof rm);
	if (n > (int32_t)sizeof rm) n = sizeof rm;
	ih_json_raw(m, what, ih_strlen(what));
	if (n > 0) ih_json_raw(m, ": ", 2);
	for (int32_t i = 0; i < n; i++) ih_json_raw(m, rm[i] == '\n' ? "; " : &rm[i], rm[i] == '\n' ? 2 : 1);
	ih_set_error(m->buf, m->len);
}

/* Carries out o after the reconcile function answered code, as Go's kit
 * does: the children only after IH_OK (a failed reconcile's set may be
 * partial, and pruning by it would delete), the status whatever the answer
 * (a failure can be a condition; skipped when the primary is gone: its
 * absent reconcile follows), the requeue only when all succeeded, 0
 * included, so an outcome without one clears the key's timer. The answer. */
static inline int32_t ih_reconcile_settle(ih_outcome *o, int32_t code) {
	static char mbuf[2304];
	ih_json m;
	int32_t answer = code;
	ih_json_init(&m, mbuf, sizeof mbuf);
	if (o->has_children && answer == IH_OK) {
		while (o->children.depth > 0) ih_json_end(&o->children);
		int32_t r = o->children.overflow ? IH_ERR_TOO_LARGE : ih_children_apply(o->children.buf, o->children.len);
		if (o->children.overflow) {
			ih_json_raw(&m, "children over IH_RECONCILE_CHILDREN_BUF bytes", 45);
			ih_set_error(m.buf, m.len);
			answer = IH_ERROR;
		} else if (r != 0) {
			char d[21];
			ih_json_raw(&m, "children_apply: ", 16);
			if (r > 0) {
				ih_json_raw(&m, d, ih_itoa(r, d));
				ih_reconcile_fail(&m, " children failed");
			} else {
				ih_reconcile_fail(&m, ih_error_name(r));
			}
			answer = IH_ERROR;
		}
	}
	if (o->has_status) {
		ih_json *s = &o->status;
		if (o->n_conditions) {
			ih_json_member_array(s, "conditions");
			for (int i = 0; i < o->n_conditions; i++) {
				ih_condition *c = &o->conditions[i];
				ih_json_object(s);
				ih_json_member_str(s, "type", c->type);
				ih_json_member_str(s, "status", c->status);
				if (c->reason && *c->reason) ih_json_member_str(s, "reason", c->reason);
				if (c->message && *c->message) ih_json_member_str(s, "message", c->message);
				ih_json_end(s);
			}
		}
		while (s->depth > 0) ih_json_end(s);
		int32_t r = s->overflow ? IH_ERR_TOO_LARGE : ih_status_apply(s->buf, s->len);
		if (r < 0 && r != IH_ERR_ABSENT && answer == IH_OK) {
			ih_json_init(&m, mbuf, sizeof mbuf);
			if (s->overflow) {
				ih_json_raw(&m, "status over IH_RECONCILE_STATUS_BUF bytes", 41);
				ih_set_error(m.buf, m.len);
			} else {
				ih_json_raw(&m, "status_apply: ", 14);
				ih_reconcile_fail(&m, ih_error_name(r));
			}
			answer = IH_ERROR;
		}
	}
	if (answer == IH_OK) {
		int32_t r = ih_reconcile_requeue_after(o->requeue_after_ms);
		if (r < 0) {
			ih_json_init(&m, mbuf, sizeof mbuf);
			ih_json_raw(&m, "reconcile_requeue_after: ", 25);
			ih_json_raw(&m, ih_error_name(r), ih_strlen(ih_error_name(r)));
			ih_set_error(m.buf, m.len);
			answer = IH_ERROR;
		}
	}
	return answer;
}

/* The body of the ih_reconcile export (IH_RECONCILER). */
static inline int32_t ih_reconcile_run(int32_t header_len, int32_t (*fn)(const ih_request *, ih_outcome *)) {
	static uint8_t h[IH_RECONCILE_HEADER_BUF];
	static ih_outcome o;
	if (header_len > (int32_t)sizeof h || ih_header_read(h, sizeof h) != header_len) {
		static const char m[] = "ih_reconcile: header over IH_RECONCILE_HEADER_BUF bytes or unreadable";
		ih_set_error(m, sizeof m - 1);
		return IH_ERROR;
	}
	ih_request req;
	req.header = h;
	req.ns = ih_header_field(h, IH_FIELD_NAMESPACE, &req.ns_len);
	req.name = ih_header_field(h, IH_FIELD_NAME, &req.name_len);
	req.exists = !(ih_header_flags(h) & IH_FLAG_ABSENT);
	req.deleting = (ih_header_flags(h) & IH_FLAG_DELETING) != 0;
	req.initial = (ih_header_flags(h) & IH_FLAG_INITIAL_LIST) != 0;
	o.requeue_after_ms = 0, o.has_children = 0, o.has_status = 0, o.in_child = 0, o.n_conditions = 0;
	return ih_reconcile_settle(&o, fn(&req, &o));
}

#define IH_RECONCILER(fn) \
	IH_EXPORT("ih_reconcile") int32_t ih_reconcile(int32_t header_len) { return ih_reconcile_run(header_len, fn); }

/* The ih_handle of a controller-only plugin: the host never calls it on a
 * plugin configured with controller:; its answer names what is missing. */
#define IH_NOT_A_HANDLER() \
	IH_EXPORT("ih_handle") int32_t ih_handle(int32_t header_len) { \
		static const char m[] = "this plugin is a controller (it exports ih_reconcile): configure it with a controller: block (abi/ABI.md section 18)"; \
		(void)header_len; \
		ih_set_error(m, sizeof m - 1); \
		return IH_ERROR; \
	}

#endif
