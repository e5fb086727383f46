/*
 * fuzz_view.c - view set records (src/storage/view.c), read back from a
 * view file at startup or from etcd: decode any bytes; a decoded set must
 * encode to bytes that decode to the same set, and each view's selectors
 * are evaluated on an object as a replace evaluates them.
 *
 * Input: the view file's bytes.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "storage/view.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char pod[] = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-0\",\"namespace\":"
			  "\"default\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":"
			  "\"edge-1\"},\"status\":{\"phase\":\"Running\"}}";

static void check_same(const struct view_set *a, const struct view_set *b)
{
	FZ_CHECK(a->n == b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct view_rec *x = &a->v[i], *y = &b->v[i];
		FZ_CHECK(!strcmp(x->namespace, y->namespace) && x->rv == y->rv);
		FZ_CHECK(!strcmp(x->label_selector, y->label_selector));
		FZ_CHECK(!strcmp(x->field_selector, y->field_selector));
	}
}

static void cover(const struct view_rec *r)
{
	struct view_matcher m;
	if (view_matcher_init(&m, r) < 0)
		return;
	int c = view_matcher_covers(&m, "default", pod, sizeof pod - 1);
	FZ_CHECK(c == 0 || c == 1);
	view_matcher_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct view_set set, again;
	if (view_set_decode((const char *)data, size, &set) < 0) {
		FZ_CHECK(set.n == 0 && set.v == NULL);
		return 0;
	}
	struct buf enc = BUF_INIT;
	FZ_CHECK(view_set_encode(&set, &enc) == 0);
	FZ_CHECK(view_set_decode(enc.data, enc.len, &again) == 0);
	check_same(&set, &again);
	for (size_t i = 0; i < set.n; i++) {
		FZ_CHECK(view_set_find(&again, &set.v[i]) == &again.v[i]);
		cover(&set.v[i]);
	}
	view_set_free(&again);
	view_set_free(&set);
	buf_free(&enc);
	return 0;
}
