/*
 * fuzz_etcd_records.c - the etcd store's S/m records ("<rv> <node>/<comp>
 * ... " or a tombstone "<rv> @<time>", src/storage/etcd_records.c), read
 * from the pool's shared etcd, where any node may have written them:
 * parse any value.  The same bytes as an S/h record's reasons: adding a
 * reason makes it present once, removing it makes it absent, and the other
 * reasons stay as they were.
 *
 * Input: the record's value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "storage/etcd_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reasons(const char *reasons)
{
	static const char *const tokens[] = {ER_REASON_SINGLE, ER_REASON_LEGACY,
					     "0123456789abcdef"};
	for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
		char *with = er_reasons_with(reasons, tokens[i]);
		char *without = er_reasons_without(reasons, tokens[i]);
		FZ_CHECK(with && without);
		FZ_CHECK(er_reasons_has(with, tokens[i]) && !er_reasons_has(without, tokens[i]));
		char *again = er_reasons_with(without, tokens[i]);
		FZ_CHECK(again && !strcmp(again, with)); /* the same set, the same text */
		char *back = er_reasons_without(with, tokens[i]);
		FZ_CHECK(back && !strcmp(back, without));
		FZ_CHECK(strlen(without) <= strlen(reasons));
		free(with);
		free(without);
		free(again);
		free(back);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char node[] = "edge-1", side[] = "/yurthub/registry", prefix[] = "/registry";
	struct etcd_store es;
	memset(&es, 0, sizeof es);
	es.node = node;
	es.side = side;
	es.prefix = prefix;
	char *value = fz_strndup(data, size);
	struct etcd_kv kv = {.key = (char *)"/yurthub/registry/m/registry/pods/default/web-0",
			     .value = value,
			     .value_len = size,
			     .mod_revision = 7};
	kv.key_len = strlen(kv.key);
	struct er_meta m;
	memset(&m, 0, sizeof m);
	if (er_meta_parse(&es, &kv, &m) == 0) {
		FZ_CHECK(m.present && m.holders && strlen(m.holders) <= size);
		FZ_CHECK(m.nholders <= size / 2);
		FZ_CHECK(!er_meta_is_tombstone(&m) || m.nholders == 0);
	}
	er_meta_free(&m);
	check_reasons(value);
	free(value);
	return 0;
}
