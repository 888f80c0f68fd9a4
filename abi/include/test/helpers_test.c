/* Native unit test of informer_host.h's inline helpers (make kits-test):
 * the imports are only declared, never called, so this links natively. */
#include <stdio.h>
#include <string.h>
#include "informer_host.h"

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

int main(void) {
	int64_t r = (int64_t)IH_KIND_STRING << 32 | 7;
	CHECK(ih_field_kind(r) == IH_KIND_STRING && ih_field_size(r) == 7);
	r = (int64_t)1500 << 32 | 4000;
	CHECK(ih_list_total(r) == 1500 && ih_list_size(r) == 4000);

	const char page[] = "a/p1\na/p2\nnode\n";
	int32_t at = 0, len, n = 0;
	const char *key;
	char seen[64] = "";
	while (ih_cache_next(page, (int32_t)sizeof page - 1, &at, &key, &len)) {
		strncat(seen, key, (size_t)len);
		strcat(seen, ",");
		n++;
	}
	CHECK(n == 3 && strcmp(seen, "a/p1,a/p2,node,") == 0);

	const uint8_t st[] = {2, 0, 0, 0, 'k', '1', 3, 0, 0, 0, 'k', '2', '2', 9, 0, 0, 0, 'x'};
	const uint8_t *k;
	at = 0, n = 0;
	while (ih_state_next(st, (int32_t)sizeof st, &at, &k, &len)) n++;
	CHECK(n == 2 && len == 3 && memcmp(k, "k22", 3) == 0); /* the truncated third entry ends the walk */

	/* The header of ABI.md section 8's example. */
	static const uint8_t h[108] = {1, 2, 4, 9, 0x6c, 0, 0, 0,
		0x50, 0, 0, 0, 4, 0, 0, 0, 0x54, 0, 0, 0, 0, 0, 0, 0, 0x54, 0, 0, 0, 2, 0, 0, 0,
		0x56, 0, 0, 0, 4, 0, 0, 0, 0x5a, 0, 0, 0, 3, 0, 0, 0, 0x5d, 0, 0, 0, 7, 0, 0, 0,
		0x64, 0, 0, 0, 5, 0, 0, 0, 0x69, 0, 0, 0, 2, 0, 0, 0, 0x6b, 0, 0, 0, 1, 0, 0, 0,
		'p', 'o', 'd', 's', 'v', '1', 'p', 'o', 'd', 's', 'P', 'o', 'd', 'd', 'e', 'f',
		'a', 'u', 'l', 't', 'w', 'e', 'b', '-', '0', 'u', '1', '5'};
	char kb[32];
	int32_t kl = ih_header_key(h, kb, sizeof kb);
	CHECK(kl == 13 && memcmp(kb, "default/web-0", 13) == 0);
	CHECK(ih_header_key(h, kb, 5) == -1);
	CHECK(ih_header_type(h) == IH_EVENT_UPDATE && (ih_header_flags(h) & IH_FLAG_HAS_OLD_OBJECT));

	if (failures == 0) printf("ok: informer_host.h helpers\n");
	return failures != 0;
}
