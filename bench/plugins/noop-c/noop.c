/*
 * noop-c: the benchmarks' no-op C plugin. ih_handle returns at once; on an
 * instance's first event it logs one line, "benchfirst", which the reload
 * benchmark uses to see when a new version starts receiving events (the
 * host adds the plugin's name, version and the time).
 */
#include "informer_host.h"

IH_ABI_V1_MARKER()

static int seen;

IH_EXPORT("ih_handle") int32_t ih_handle(int32_t header_len) {
	(void)header_len;
	if (!seen) {
		static const char msg[] = "benchfirst";
		seen = 1;
		ih_log(IH_LOG_INFO, msg, sizeof msg - 1);
	}
	return IH_OK;
}
