/*
 * fuzz_patch.c - PATCH bodies applied to cached objects (src/kube/patch.c):
 * merge, strategic merge and JSON patch, on any document and any patch.
 * A result must be one JSON object that reads back to the same bytes, and
 * a merge patch applied twice must give what it gave once (RFC 7386).
 *
 * Input: one byte (the patch type, modulo 3), the document, NUL, the patch.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/patch.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const struct buf *a, const struct buf *b)
{
	return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

/* The result is an object, and the writer is a fixed point of itself. */
static void check_result(const struct buf *res)
{
	json_t *j = json_loadb(res->data, res->len, JSON_ALLOW_NUL, NULL);
	FZ_CHECK(json_is_object(j));
	json_decref(j);
	struct buf again = BUF_INIT;
	char *err = NULL;
	FZ_CHECK(patch_apply(PATCH_MERGE, res->data, res->len, "{}", 2, &again, &err) == 0);
	FZ_CHECK(same(res, &again));
	buf_free(&again);
}

static void check_idempotent(const struct buf *res, const char *patch, size_t len)
{
	struct buf twice = BUF_INIT;
	char *err = NULL;
	FZ_CHECK(patch_apply(PATCH_MERGE, res->data, res->len, patch, len, &twice, &err) == 0);
	FZ_CHECK(same(res, &twice));
	buf_free(&twice);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum patch_type types[3] = {PATCH_MERGE, PATCH_STRATEGIC, PATCH_JSON};
	if (size < 1)
		return 0;
	enum patch_type type = types[data[0] % 3];
	data++, size--;
	const uint8_t *doc, *patch = NULL;
	size_t doc_len, patch_len = 0;
	fz_field(&data, &size, &doc, &doc_len);
	fz_field(&data, &size, &patch, &patch_len);

	struct buf out = BUF_INIT;
	char *err = NULL;
	if (patch_apply(type, (const char *)doc, doc_len, (const char *)patch, patch_len, &out,
			&err) == 0) {
		FZ_CHECK(err == NULL);
		check_result(&out);
		if (type == PATCH_MERGE)
			check_idempotent(&out, (const char *)patch, patch_len);
	} else {
		FZ_CHECK(err != NULL && out.len == 0);
	}
	free(err);
	buf_free(&out);
	return 0;
}
