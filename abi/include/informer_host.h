/*
 * informer_host.h: the informer-host plugin ABI, version 1, for C (clang
 * --target=wasm32-wasi). abi/ABI.md is the specification; this header
 * declares its imports, exports and constants, and helpers to read the
 * event header. It needs only <stdint.h> (no libc).
 *
 * A plugin defines:
 *
 *     IH_ABI_V1_MARKER();                             // required, once
 *     IH_EXPORT("ih_handle") int32_t ih_handle(int32_t header_len);
 *     IH_EXPORT("ih_init")   int32_t ih_init(int32_t config_len);  // optional
 *     IH_EXPORT("ih_shutdown") void  ih_shutdown(void);           // optional
 *     IH_EXPORT("ih_synced") void ih_synced(int32_t header_len);  // optional
 *     IH_HANDLE_BATCH(ih_handle);                     // optional (v1.4)
 *     IH_EXPORT("ih_reconcile") int32_t ih_reconcile(int32_t header_len);
 *                                   // required in controller mode (v1.5)
 *
 * IH_HANDLE_BATCH(fn) defines the optional ih_handle_batch export over the
 * plugin's own ih_handle-shaped function fn: when events wait, the host
 * hands several in one call, and fn is called for each in order, settled
 * with its result (ABI.md section 5). Each event then costs two host
 * calls instead of one export call: worth it only where a call is dear
 * (abi/RATIONALE.md, "Batches"); a plain C plugin is faster without.
 *
 * ih_synced is called once per binding when the plugin has handled the
 * binding's initial list (after a start, restart, reload or overflow
 * repair); header_read gives a header of type IH_EVENT_NONE naming the
 * binding's resource (string 0), with empty object strings.
 *
 * ih_reconcile is called, instead of ih_handle, for a plugin the operator
 * configures as a controller (ABI.md section 18): one primary key at a
 * time, with a header of type IH_EVENT_RECONCILE whose strings 5 and 6
 * are the key, flags IH_FLAG_ABSENT or IH_FLAG_DELETING, and the primary
 * as IH_OBJECT. It answers with an ih_handle result code, and may call
 * ih_reconcile_requeue_after, ih_children_apply and ih_status_apply.
 *
 * and is linked as a reactor: -mexec-model=reactor.
 */
#ifndef INFORMER_HOST_H
#define INFORMER_HOST_H

#include <stdint.h>

#define IH_ABI_VERSION 1

#define IH_IMPORT(name) __attribute__((import_module("informer_host_v1"), import_name(name)))
#define IH_EXPORT(name) __attribute__((export_name(name)))

/* The marker export: the plugin speaks ABI v1. Never called. */
#define IH_ABI_V1_MARKER() IH_EXPORT("informer_host_abi_v1") void ih_abi_v1_marker(void) {}

/* ih_handle results. Any other value is treated like IH_ERROR. */
#define IH_OK 0
#define IH_RETRY 1
#define IH_DROP 2
#define IH_ERROR 3

/* Host function error codes (negative results). */
#define IH_ERR_ABSENT (-1)    /* no such object (old object of an add/delete) */
#define IH_ERR_NOT_FOUND (-2) /* field path does not resolve */
#define IH_ERR_BAD_PATH (-3)  /* field path syntax error */
#define IH_ERR_BOUNDS (-4)    /* (ptr, len) outside memory, or len < 0 */
#define IH_ERR_INVALID (-5)   /* bad selector or log level */
#define IH_ERR_NO_EVENT (-6)  /* event function outside ih_handle; controller function outside ih_reconcile */
#define IH_ERR_INTERNAL (-7)  /* the host failed to produce the value */
#define IH_ERR_DENIED (-8)    /* capability not granted to this plugin (v1.1) */
#define IH_ERR_CONFLICT (-9)  /* compare-and-swap: the key is at another version */
#define IH_ERR_QUOTA (-10)    /* the write would exceed the plugin's quota */
#define IH_ERR_EXISTS (-11)   /* metric name taken by another plugin with another kind or help; object exists */
/* Since v1.2 (capabilities II, ABI.md section 17). */
#define IH_ERR_FORBIDDEN (-12)     /* the apiserver refused it (403) */
#define IH_ERR_UNPROCESSABLE (-13) /* the apiserver rejected the object (422) or request (400) */
#define IH_ERR_RATE_LIMITED (-14)  /* rate limited: answer IH_RETRY */
#define IH_ERR_TIMEOUT (-15)       /* the I/O timeout passed */
#define IH_ERR_UNAVAILABLE (-16)   /* the peer could not be reached or answered 5xx */
#define IH_ERR_TOO_LARGE (-17)     /* request or response over the operator's limit */
#define IH_ERR_CANCELED (-18)      /* the host stopped the call: return */
/* Since v1.3. */
#define IH_ERR_FIELD_CONFLICT (-19) /* apply: another field manager owns the field; force or report */

/* which: the object or the old object */
#define IH_OBJECT 0
#define IH_OLD_OBJECT 1

/* field kinds, in the high 32 bits of field_read's result */
#define IH_KIND_STRING 1
#define IH_KIND_NUMBER 2
#define IH_KIND_BOOL 3
#define IH_KIND_NULL 4
#define IH_KIND_OBJECT 5
#define IH_KIND_ARRAY 6

/* log levels */
#define IH_LOG_DEBUG 0
#define IH_LOG_INFO 1
#define IH_LOG_WARN 2
#define IH_LOG_ERROR 3

/* event types and header flags */
#define IH_EVENT_NONE 0 /* the header of an ih_synced call */
#define IH_EVENT_ADD 1
#define IH_EVENT_UPDATE 2
#define IH_EVENT_DELETE 3
#define IH_EVENT_RECONCILE 4 /* v1.5: the header of an ih_reconcile call */
#define IH_FLAG_INITIAL_LIST 0x01
#define IH_FLAG_FINAL_STATE_UNKNOWN 0x02
#define IH_FLAG_HAS_OLD_OBJECT 0x04
#define IH_FLAG_SELF_WRITE 0x08 /* v1.2: the object is the result of this plugin's own k8s_write */
#define IH_FLAG_HANDED_OVER 0x10 /* v1.2: a delete: the object moved to another replica (ABI.md 4.3) */
#define IH_FLAG_MISSED_DELETE 0x20 /* v1.5: a delete inferred after the fact, with FINAL_STATE_UNKNOWN; a stub object */
#define IH_FLAG_ABSENT 0x40        /* v1.5, ih_reconcile: the key has no object (IH_OBJECT is IH_ERR_ABSENT) */
#define IH_FLAG_DELETING 0x80      /* v1.5, ih_reconcile: the object's deletionTimestamp is set */

/* header string indexes */
#define IH_FIELD_RESOURCE_NAME 0
#define IH_FIELD_GROUP 1
#define IH_FIELD_VERSION 2
#define IH_FIELD_RESOURCE 3
#define IH_FIELD_KIND 4
#define IH_FIELD_NAMESPACE 5
#define IH_FIELD_NAME 6
#define IH_FIELD_UID 7
#define IH_FIELD_RESOURCE_VERSION 8
#define IH_HEADER_FIELDS 9
#define IH_HEADER_MIN_SIZE 80

/* The read functions follow one size protocol: if the value fits in
 * (ptr, len) it is copied; either way its size is returned, so a caller
 * whose buffer was too small can grow it and call again. */
IH_IMPORT("header_read") int32_t ih_header_read(void *ptr, int32_t len);
IH_IMPORT("object_read") int32_t ih_object_read(int32_t which, void *ptr, int32_t len);
/* returns (kind << 32) | size, or a negative error code */
IH_IMPORT("field_read") int64_t ih_field_read(int32_t which, const char *path, int32_t path_len, void *ptr, int32_t len);
IH_IMPORT("config_read") int32_t ih_config_read(void *ptr, int32_t len);
IH_IMPORT("set_error") int32_t ih_set_error(const char *msg, int32_t len);
/* returns 0, or 1 when the host's rate limit dropped the line */
IH_IMPORT("log") int32_t ih_log(int32_t level, const char *msg, int32_t len);

/* Batches (ABI.md section 5, ih_handle_batch; v1.4). batch_select makes
 * event index of the batch current and returns its header size;
 * batch_result settles the current event with an ih_handle result code
 * (and the set_error message given since batch_select). */
IH_IMPORT("batch_select") int32_t ih_batch_select(int32_t index);
IH_IMPORT("batch_result") int32_t ih_batch_result(int32_t code);

/* Controller mode (ABI.md section 18; v1.5), during ih_reconcile only
 * (IH_ERR_NO_EVENT elsewhere). ih_reconcile_requeue_after asks for the key
 * again millis after an IH_OK answer (0 clears; 0 to 366 days, else
 * IH_ERR_INVALID). ih_children_apply takes a JSON array, the key's
 * complete set of children, applies each and deletes the ones applied
 * before that are not in it; it returns how many failed (one line each in
 * ih_result_message) or a negative code. ih_status_apply takes a JSON
 * object, the status fields the plugin owns, conditions completed by the
 * host. Both need capability "writes". */
#define IH_REQUEUE_AFTER_MAX_MILLIS 31622400000LL
IH_IMPORT("reconcile_requeue_after") int32_t ih_reconcile_requeue_after(int64_t millis);
IH_IMPORT("children_apply") int32_t ih_children_apply(const char *children, int32_t len);
IH_IMPORT("status_apply") int32_t ih_status_apply(const char *status, int32_t len);

/* ih_batch_run hands each event of a batch of count to handle, in order,
 * settles it with handle's result and returns how many were settled: the
 * body of an ih_handle_batch export (IH_HANDLE_BATCH). */
static inline int32_t ih_batch_run(int32_t count, int32_t (*handle)(int32_t header_len)) {
	for (int32_t i = 0; i < count; i++) {
		int32_t n = ih_batch_select(i);
		if (n < 0) return i;
		if (ih_batch_result(handle(n)) != 0) return i;
	}
	return count;
}

#define IH_HANDLE_BATCH(fn) \
	IH_EXPORT("ih_handle_batch") int32_t ih_handle_batch(int32_t count) { return ih_batch_run(count, fn); }

/* Cache reads (capability "cache", ABI.md 16.1; v1.1). Granted per
 * resource in config.yaml; ungranted calls return IH_ERR_DENIED. */
#define IH_FIRST_HANDLE 2    /* cache_get handles are which values >= 2 */
#define IH_MAX_HANDLES 1024  /* live handles per export call */
#define IH_MAX_LIST_PAGE 1000 /* keys per cache_list/cache_index call */
/* returns a handle for object_read/field_read, valid until the current
 * export call returns; IH_ERR_ABSENT when the cache has no such object */
IH_IMPORT("cache_get") int32_t ih_cache_get(const char *res, int32_t res_len, const char *ns, int32_t ns_len, const char *name, int32_t name_len);
/* keys ("namespace/name\n" each, sorted) from index start on, at most
 * IH_MAX_LIST_PAGE; returns (total << 32) | size, or a negative code */
IH_IMPORT("cache_list") int64_t ih_cache_list(const char *res, int32_t res_len, const char *ns, int32_t ns_len, const char *selector, int32_t selector_len, int32_t start, void *ptr, int32_t len);
/* index "namespace" (value: a namespace) or "owner" (value: an owner's uid) */
IH_IMPORT("cache_index") int64_t ih_cache_index(const char *res, int32_t res_len, const char *index, int32_t index_len, const char *value, int32_t value_len, int32_t start, void *ptr, int32_t len);
/* State (ABI.md 16.2), granted by grants.state. Keys are 1..1024 bytes.
 * if_version: -1 any, 0 only if absent (set), else the version required. */
#define IH_STATE_ANY_VERSION (-1)
#define IH_STATE_MAX_KEY_LEN 1024
#define IH_STATE_MAX_LIST 1000
/* returns the value's size (size protocol); writes the version (LE i64) at *version */
IH_IMPORT("state_get") int32_t ih_state_get(const void *key, int32_t key_len, void *ptr, int32_t len, int64_t *version);
/* returns the new version, or a negative error code */
IH_IMPORT("state_set") int64_t ih_state_set(const void *key, int32_t key_len, const void *val, int32_t val_len, int64_t if_version);
IH_IMPORT("state_delete") int32_t ih_state_delete(const void *key, int32_t key_len, int64_t if_version);
/* returns (count << 32) | size; keys as {u32 LE length, bytes}, written if size <= len */
IH_IMPORT("state_list") int64_t ih_state_list(const void *prefix, int32_t prefix_len, const void *after, int32_t after_len,
                                              int32_t max, void *ptr, int32_t len);
/* Metrics (ABI.md 16.3), granted per plugin (grants.metrics). A
 * declaration is JSON: {"name":"pods","help":"...","labels":["namespace"],
 * "buckets":[0.1,1]} (buckets for histograms only). metric_declare returns
 * an id (>= 0) for the updates, or IH_ERR_DENIED / IH_ERR_INVALID /
 * IH_ERR_EXISTS / IH_ERR_QUOTA (past the plugin's byte budget, v1.3). Label
 * values are passed as one buffer, separated by a zero byte, in the
 * declared order (len 0 for a metric without labels), each at most 1024
 * bytes (v1.3). Updates return 0, IH_METRIC_DROPPED (past the plugin's
 * series cap: dropped and counted by the host), IH_ERR_QUOTA (a new series
 * past the byte budget: dropped and counted too), or IH_ERR_DENIED /
 * IH_ERR_INVALID. */
#define IH_METRIC_COUNTER 0
#define IH_METRIC_GAUGE 1
#define IH_METRIC_HISTOGRAM 2
#define IH_METRIC_DROPPED 1
IH_IMPORT("metric_declare") int32_t ih_metric_declare(int32_t kind, const char *decl, int32_t len);
IH_IMPORT("metric_add") int32_t ih_metric_add(int32_t id, double value, const char *labels, int32_t len);
IH_IMPORT("metric_set") int32_t ih_metric_set(int32_t id, double value, const char *labels, int32_t len);
IH_IMPORT("metric_observe") int32_t ih_metric_observe(int32_t id, double value, const char *labels, int32_t len);

/* Since v1.2 (ABI.md section 17): the message of the last capabilities II
 * call of this export call (empty after a success), size protocol. */
IH_IMPORT("result_message") int32_t ih_result_message(char *buf, int32_t len);

/* Since v1.2 (ABI.md section 17.1), capability "writes": one Kubernetes
 * write. res is a granted resource as the grant names it (a configured
 * name, or "group/version/resource"); sub "" or "status"; uid and rv are
 * optional preconditions (len 0 = none). Returns a handle (>= 2) to the
 * object the apiserver answered with, readable with ih_object_read and
 * ih_field_read until the export call returns; 0 after a delete; or an
 * IH_ERR_* code, with the apiserver's message in ih_result_message. */
#define IH_WRITE_CREATE 1
#define IH_WRITE_MERGE_PATCH 2
#define IH_WRITE_JSON_PATCH 3
#define IH_WRITE_APPLY 4
#define IH_WRITE_DELETE 5
#define IH_WRITE_FORCE 0x1      /* apply: take over conflicting fields */
#define IH_WRITE_MUST_EXIST 0x2 /* apply: update only, IH_ERR_ABSENT when there is no object (v1.3) */
IH_IMPORT("k8s_write") int32_t ih_k8s_write(int32_t op, const char *res, int32_t res_len, const char *ns, int32_t ns_len,
                                             const char *name, int32_t name_len, const char *sub, int32_t sub_len,
                                             const char *body, int32_t body_len, const char *uid, int32_t uid_len,
                                             const char *rv, int32_t rv_len, int32_t flags);
/* Events (capability "events", ABI.md 17.2; v1.2), granted by
 * grants.events. Records a Kubernetes Event about the object which selects
 * (IH_OBJECT, IH_OLD_OBJECT or a cache_get handle), attributed to the
 * plugin (reportingController informer-host/<plugin>). reason: 1..128
 * bytes, CamelCase; message: up to 1024 bytes. Returns 0 or a negative
 * code; the host sends it in the background, aggregating repeats. */
#define IH_KUBE_EVENT_NORMAL 0
#define IH_KUBE_EVENT_WARNING 1
#define IH_MAX_EVENT_REASON 128
#define IH_MAX_EVENT_MESSAGE 1024
IH_IMPORT("event_record") int32_t ih_event_record(int32_t which, int32_t type, const char *reason, int32_t reason_len,
                                                  const char *msg, int32_t msg_len);

/* HTTP upstreams (capability "http", ABI.md 17.3; v1.2), granted by
 * grants.http. Calls the upstream the operator named, with a method the
 * upstream allows and a path (and query) under its URL: "" or starting
 * with "/" or "?"; ".." and "//" are IH_ERR_INVALID. headers: "Name:
 * value" lines separated by '\n' (len 0: none). Returns the HTTP status
 * (100..599, 5xx included) or IH_ERR_DENIED / IH_ERR_INVALID /
 * IH_ERR_TOO_LARGE / IH_ERR_TIMEOUT / IH_ERR_UNAVAILABLE (no response) /
 * IH_ERR_RATE_LIMITED (the plugin's concurrency bound) / IH_ERR_CANCELED.
 * The response stays readable until the next http_request or the end of
 * the export call: ih_http_response_read(IH_HTTP_BODY or IH_HTTP_HEADER
 * ("Name: value\n" lines, sorted), ...), size protocol; IH_ERR_ABSENT
 * when the last call got no response. */
#define IH_HTTP_BODY 0
#define IH_HTTP_HEADER 1
IH_IMPORT("http_request") int32_t ih_http_request(const char *upstream, int32_t upstream_len, const char *method,
                                                  int32_t method_len, const char *path, int32_t path_len,
                                                  const char *headers, int32_t headers_len, const void *body,
                                                  int32_t body_len);
IH_IMPORT("http_response_read") int32_t ih_http_response_read(int32_t which_part, void *ptr, int32_t len);

static inline uint32_t ih_u32le(const uint8_t *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Header accessors. h points at a header read with ih_header_read. */
static inline int ih_header_version(const uint8_t *h) { return h[0]; }
static inline int ih_header_type(const uint8_t *h) { return h[1]; }
static inline int ih_header_flags(const uint8_t *h) { return h[2]; }

/* ih_header_field sets *len and returns a pointer to string i (not
 * NUL-terminated). */
static inline const char *ih_header_field(const uint8_t *h, int i, int32_t *len) {
	const uint8_t *d = h + 8 + 8 * i;
	*len = (int32_t)ih_u32le(d + 4);
	return (const char *)h + ih_u32le(d);
}

/* Unpacking the i64 results. field_read: kind (IH_KIND_*) and size;
 * cache_list/cache_index: total selected and the page's size; state_list:
 * keys in the page and its size. Only for results >= 0 (else an error). */
static inline int ih_field_kind(int64_t r) { return (int)(r >> 32); }
static inline int32_t ih_field_size(int64_t r) { return (int32_t)(uint32_t)r; }
static inline int32_t ih_list_total(int64_t r) { return (int32_t)(r >> 32); }
static inline int32_t ih_list_size(int64_t r) { return (int32_t)(uint32_t)r; }

/* ih_cache_next walks a cache_list/cache_index page of size bytes: it sets
 * *key and *len to the key at *at, advances *at, and returns 1, or returns
 * 0 at the end. Start with *at = 0; the next page starts at start + the
 * keys read (ABI.md 16.1). */
static inline int ih_cache_next(const char *page, int32_t size, int32_t *at, const char **key, int32_t *len) {
	int32_t i = *at;
	if (i >= size) return 0;
	int32_t j = i;
	while (j < size && page[j] != '\n') j++;
	*key = page + i;
	*len = j - i;
	*at = j + 1;
	return 1;
}

/* ih_state_next walks a state_list page ({u32 LE length, bytes} per key)
 * the same way; it returns 0 at the end or at a truncated entry. */
static inline int ih_state_next(const uint8_t *page, int32_t size, int32_t *at, const uint8_t **key, int32_t *len) {
	int32_t i = *at;
	if (i + 4 > size) return 0;
	uint32_t n = ih_u32le(page + i);
	if (n > (uint32_t)(size - i - 4)) return 0;
	*key = page + i + 4;
	*len = (int32_t)n;
	*at = i + 4 + (int32_t)n;
	return 1;
}

/* ih_header_key writes "namespace/name" (or "name" when cluster-scoped)
 * into buf and returns its length, or -1 if it does not fit in cap. */
static inline int32_t ih_header_key(const uint8_t *h, char *buf, int32_t cap) {
	int32_t nsl, nl, n = 0;
	const char *ns = ih_header_field(h, IH_FIELD_NAMESPACE, &nsl);
	const char *name = ih_header_field(h, IH_FIELD_NAME, &nl);
	if (nsl + nl + 1 > cap) return -1;
	for (int32_t i = 0; i < nsl; i++) buf[n++] = ns[i];
	if (nsl > 0) buf[n++] = '/';
	for (int32_t i = 0; i < nl; i++) buf[n++] = name[i];
	return n;
}

#endif
