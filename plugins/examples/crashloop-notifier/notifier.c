/*
 * crashloop-notifier: posts a JSON message to a named HTTP upstream when a
 * container of a pod enters CrashLoopBackOff, once per transition: on an
 * update whose new object has the container waiting with reason
 * CrashLoopBackOff and whose old object did not. The message:
 *
 *     {"namespace":"shop","pod":"web-0","container":"app","reason":"CrashLoopBackOff","restartCount":3}
 *
 * Config (optional): {"upstream": "webhook", "path": "/crashloop"}, the
 * defaults. The upstream must be granted (grants.http) and allow POST.
 *
 * A timeout, an unreachable upstream, a 5xx or the plugin's concurrency
 * bound answer IH_RETRY (the host delivers the update again later, and the
 * transition is still there to see); any other failure is logged and
 * dropped. No libc: the module stays a few KB.
 *
 * Build (or `make plugins`):
 *
 *     clang --target=wasm32-wasi --sysroot=/usr -Oz -mexec-model=reactor \
 *         -Iabi/include -Wl,--strip-debug -o build/plugins/crashloop-notifier.wasm \
 *         plugins/examples/crashloop-notifier/notifier.c
 */
#include "informer_host.h"

IH_ABI_V1_MARKER()

static uint8_t header[4096];
static char upstream[128] = "webhook";
static int32_t upstream_len = 7;
static char path[512] = "/crashloop";
static int32_t path_len = 10;

/* A small append-only buffer. */
typedef struct {
	char b[2048];
	int n;
} buf;

static void put(buf *w, const char *s, int32_t n) {
	for (int32_t i = 0; i < n && w->n < (int)sizeof w->b; i++)
		w->b[w->n++] = s[i];
}

static void puts_(buf *w, const char *s) {
	while (*s && w->n < (int)sizeof w->b)
		w->b[w->n++] = *s++;
}

/* put_json_str writes s as a JSON string. */
static void put_json_str(buf *w, const char *s, int32_t n) {
	put(w, "\"", 1);
	for (int32_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			put(w, "\\", 1);
		if ((unsigned char)s[i] >= 0x20)
			put(w, s + i, 1);
	}
	put(w, "\"", 1);
}

static int32_t slen(const char *s) {
	int32_t n = 0;
	while (s[n])
		n++;
	return n;
}

/* field reads the string (or the JSON text of a number) at path into out;
 * returns its length, or a negative code. */
static int32_t field(int32_t which, const char *p, int32_t plen, char *out, int32_t cap) {
	int64_t r = ih_field_read(which, p, plen, out, cap);
	if (r < 0)
		return (int32_t)r;
	int32_t size = (int32_t)(r & 0xffffffff);
	return size <= cap ? size : IH_ERR_INTERNAL;
}

/* status_path builds "status.containerStatuses[i]<suffix>". */
static int32_t status_path(char *out, int i, const char *suffix) {
	buf w = {.n = 0};
	puts_(&w, "status.containerStatuses[");
	char d[10];
	int n = 0;
	do {
		d[n++] = (char)('0' + i % 10);
		i /= 10;
	} while (i);
	while (n)
		put(&w, &d[--n], 1);
	puts_(&w, "]");
	puts_(&w, suffix);
	for (int k = 0; k < w.n; k++)
		out[k] = w.b[k];
	return w.n;
}

static const char crash[] = "CrashLoopBackOff";

static int is_crash(const char *s, int32_t n) {
	if (n != (int32_t)sizeof crash - 1)
		return 0;
	for (int32_t i = 0; i < n; i++)
		if (s[i] != crash[i])
			return 0;
	return 1;
}

static int eq(const char *a, int32_t an, const char *b, int32_t bn) {
	if (an != bn)
		return 0;
	for (int32_t i = 0; i < an; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

/* old_crashing reports whether the old object's status of container name
 * was already CrashLoopBackOff. */
static int old_crashing(const char *name, int32_t name_len) {
	char p[96], v[256];
	for (int i = 0; i < 64; i++) {
		int32_t n = field(IH_OLD_OBJECT, p, status_path(p, i, ".name"), v, sizeof v);
		if (n < 0)
			return 0; /* no such container in the old object */
		if (!eq(v, n, name, name_len))
			continue;
		n = field(IH_OLD_OBJECT, p, status_path(p, i, ".state.waiting.reason"), v, sizeof v);
		return n > 0 && is_crash(v, n);
	}
	return 0;
}

static void log_str(int level, buf *w) { ih_log(level, w->b, w->n); }

static const char *code_name(int32_t c) {
	switch (c) {
	case IH_ERR_DENIED: return "ERR_DENIED";
	case IH_ERR_INVALID: return "ERR_INVALID";
	case IH_ERR_TOO_LARGE: return "ERR_TOO_LARGE";
	case IH_ERR_TIMEOUT: return "ERR_TIMEOUT";
	case IH_ERR_UNAVAILABLE: return "ERR_UNAVAILABLE";
	case IH_ERR_RATE_LIMITED: return "ERR_RATE_LIMITED";
	case IH_ERR_CANCELED: return "ERR_CANCELED";
	}
	return "error";
}

/* notify posts one message; returns an ih_handle result. */
static int32_t notify(const char *ns, int32_t ns_len, const char *pod, int32_t pod_len, const char *c, int32_t c_len,
                      const char *restarts, int32_t restarts_len) {
	buf m = {.n = 0};
	puts_(&m, "{\"namespace\":");
	put_json_str(&m, ns, ns_len);
	puts_(&m, ",\"pod\":");
	put_json_str(&m, pod, pod_len);
	puts_(&m, ",\"container\":");
	put_json_str(&m, c, c_len);
	puts_(&m, ",\"reason\":\"CrashLoopBackOff\",\"restartCount\":");
	if (restarts_len > 0)
		put(&m, restarts, restarts_len);
	else
		puts_(&m, "0");
	puts_(&m, "}");
	static const char hdr[] = "Content-Type: application/json";
	int32_t status = ih_http_request(upstream, upstream_len, "POST", 4, path, path_len, hdr, sizeof hdr - 1, m.b, m.n);
	if (status >= 200 && status < 300)
		return IH_OK;

	buf e = {.n = 0};
	char msg[512];
	int32_t n = ih_result_message(msg, sizeof msg);
	puts_(&e, "crashloop notification for ");
	put(&e, pod, pod_len);
	puts_(&e, ": ");
	if (status > 0) {
		puts_(&e, "upstream answered ");
		char d[3] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10), (char)('0' + status % 10)};
		put(&e, d, 3);
	} else {
		puts_(&e, code_name(status));
		if (n > 0 && n <= (int32_t)sizeof msg) {
			puts_(&e, ": ");
			put(&e, msg, n);
		}
	}
	log_str(IH_LOG_WARN, &e);
	ih_set_error(e.b, e.n);
	switch (status) {
	case IH_ERR_TIMEOUT:
	case IH_ERR_UNAVAILABLE:
	case IH_ERR_RATE_LIMITED:
		return IH_RETRY;
	}
	return status >= 500 ? IH_RETRY : IH_DROP;
}

/* config_string copies the JSON string value of "key" in cfg into out. */
static void config_string(const char *cfg, int32_t n, const char *key, char *out, int32_t cap, int32_t *out_len) {
	int32_t kl = slen(key);
	for (int32_t i = 0; i + kl + 2 < n; i++) {
		if (cfg[i] != '"' || !eq(cfg + i + 1, kl, key, kl) || cfg[i + 1 + kl] != '"')
			continue;
		int32_t j = i + kl + 2;
		while (j < n && (cfg[j] == ' ' || cfg[j] == ':'))
			j++;
		if (j >= n || cfg[j] != '"')
			return;
		int32_t k = 0;
		for (j++; j < n && cfg[j] != '"' && k < cap; j++)
			out[k++] = cfg[j];
		*out_len = k;
		return;
	}
}

IH_EXPORT("ih_init") int32_t ih_init(int32_t config_len) {
	static char cfg[1024];
	if (config_len > (int32_t)sizeof cfg) {
		static const char msg[] = "config larger than 1 KiB";
		ih_set_error(msg, sizeof msg - 1);
		return 1;
	}
	if (config_len > 0 && ih_config_read(cfg, config_len) == config_len) {
		config_string(cfg, config_len, "upstream", upstream, sizeof upstream, &upstream_len);
		config_string(cfg, config_len, "path", path, sizeof path, &path_len);
	}
	return 0;
}

IH_EXPORT("ih_handle") int32_t ih_handle(int32_t header_len) {
	if (header_len > (int32_t)sizeof header || ih_header_read(header, header_len) != header_len)
		return IH_DROP;
	if (ih_header_type(header) != IH_EVENT_UPDATE)
		return IH_OK; /* a transition needs the old object */
	int32_t ns_len, pod_len;
	const char *ns = ih_header_field(header, IH_FIELD_NAMESPACE, &ns_len);
	const char *pod = ih_header_field(header, IH_FIELD_NAME, &pod_len);

	char p[96], name[256], reason[64], restarts[24];
	for (int i = 0; i < 64; i++) {
		int32_t nl = field(IH_OBJECT, p, status_path(p, i, ".name"), name, sizeof name);
		if (nl < 0)
			break;
		int32_t rl = field(IH_OBJECT, p, status_path(p, i, ".state.waiting.reason"), reason, sizeof reason);
		if (rl <= 0 || !is_crash(reason, rl) || old_crashing(name, nl))
			continue;
		int32_t cl = field(IH_OBJECT, p, status_path(p, i, ".restartCount"), restarts, sizeof restarts);
		int32_t r = notify(ns, ns_len, pod, pod_len, name, nl, restarts, cl);
		if (r != IH_OK)
			return r;
	}
	return IH_OK;
}
