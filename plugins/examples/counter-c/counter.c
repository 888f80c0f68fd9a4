/*
 * counter-c: an informer-host plugin in C. It counts events per type and
 * logs the running totals through the host's log import, with the
 * namespace/name of the object, e.g.
 *
 *     update shop/web-0: add=3 update=1 delete=0
 *
 * It uses no libc function at all, so the module stays around 1 KB.
 *
 * Build (or `make plugins`):
 *
 *     clang --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor \
 *         -Iabi/include -Wl,--strip-debug -o build/plugins/counter-c.wasm \
 *         plugins/examples/counter-c/counter.c
 */
#include "informer_host.h"

IH_ABI_V1_MARKER()

static uint8_t header[4096];
static char line[600];
static uint32_t counts[4]; /* by event type; 0 = unknown */

static int put(int at, const char *s, int32_t n) {
	for (int32_t i = 0; i < n && at < (int)sizeof line; i++)
		line[at++] = s[i];
	return at;
}

static int put_str(int at, const char *s) {
	while (*s && at < (int)sizeof line)
		line[at++] = *s++;
	return at;
}

static int put_u32(int at, uint32_t v) {
	char d[10];
	int n = 0;
	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at < (int)sizeof line)
		line[at++] = d[--n];
	return at;
}

IH_EXPORT("ih_handle") int32_t ih_handle(int32_t header_len) {
	if (header_len > (int32_t)sizeof header) {
		static const char msg[] = "header larger than 4 KiB";
		ih_set_error(msg, sizeof msg - 1);
		return IH_DROP;
	}
	if (ih_header_read(header, header_len) != header_len)
		return IH_ERROR;
	int type = ih_header_type(header);
	counts[type >= 1 && type <= 3 ? type : 0]++;

	static const char *const names[] = {"unknown", "add", "update", "delete"};
	int32_t ns_len, name_len;
	const char *ns = ih_header_field(header, IH_FIELD_NAMESPACE, &ns_len);
	const char *name = ih_header_field(header, IH_FIELD_NAME, &name_len);

	int at = put_str(0, names[type >= 1 && type <= 3 ? type : 0]);
	at = put_str(at, " ");
	if (ns_len > 0) {
		at = put(at, ns, ns_len);
		at = put_str(at, "/");
	}
	at = put(at, name, name_len);
	at = put_str(at, ": add=");
	at = put_u32(at, counts[1]);
	at = put_str(at, " update=");
	at = put_u32(at, counts[2]);
	at = put_str(at, " delete=");
	at = put_u32(at, counts[3]);
	ih_log(IH_LOG_INFO, line, at);
	return IH_OK;
}
