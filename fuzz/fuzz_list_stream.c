/*
 * fuzz_list_stream.c - the incremental list decoder (src/kube/stream.c) on
 * any body, fed once whole and once in the pieces of a chunk plan: both
 * must give the same items (bytes and metadata), the same list metadata and
 * the same verdict, and every item must be one JSON object.
 *
 * Input: one byte of chunk plan (fuzz_common.h), then the body.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/stream.h"
#include "stream_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	struct buf log; /* the items, recorded */
	int rc;
	struct list_meta meta;
	char continue_token[4096];
};

static int on_item(void *ctx, const struct stream_object *item)
{
	struct run *r = ctx;
	stream_check_object(&r->log, item);
	return 0;
}

/* Decode body in pieces of the plan (NULL: in one piece). */
static void decode(struct run *r, const char *body, size_t len, struct fz_chunks *plan)
{
	struct list_decoder *d = list_decoder_new(on_item, r);
	FZ_CHECK(d != NULL);
	r->rc = 0;
	for (size_t off = 0; off < len && r->rc == 0;) {
		size_t n = plan ? fz_chunks_next(plan, len - off) : len;
		r->rc = list_decoder_feed(d, body + off, n);
		off += n;
	}
	if (r->rc == 0)
		r->rc = list_decoder_finish(d, &r->meta);
	FZ_CHECK(r->rc == 0 || *list_decoder_error(d));
	if (r->rc == 0) {
		const char *ct = r->meta.continue_token;
		snprintf(r->continue_token, sizeof r->continue_token, "%s", ct ? ct : "(none)");
		r->meta.continue_token = NULL; /* owned by the decoder */
		FZ_CHECK(strlen(r->meta.kind) < sizeof r->meta.kind);
		FZ_CHECK(strlen(r->meta.resource_version) < sizeof r->meta.resource_version);
	}
	list_decoder_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct fz_chunks plan;
	fz_chunks_init(&plan, data[0]);
	const char *body = (const char *)data + 1;
	size_t len = size - 1;

	struct run whole = {.log = BUF_INIT}, pieces = {.log = BUF_INIT};
	decode(&whole, body, len, NULL);
	decode(&pieces, body, len, &plan);
	FZ_CHECK(whole.rc == pieces.rc);
	FZ_CHECK(whole.log.len == pieces.log.len &&
		 (!whole.log.len || !memcmp(whole.log.data, pieces.log.data, whole.log.len)));
	if (whole.rc == 0) {
		const struct list_meta *a = &whole.meta, *b = &pieces.meta;
		FZ_CHECK(!strcmp(a->kind, b->kind) && a->rv == b->rv && a->items == b->items);
		FZ_CHECK(!strcmp(a->resource_version, b->resource_version));
		FZ_CHECK(a->remaining_item_count == b->remaining_item_count);
		FZ_CHECK(!strcmp(whole.continue_token, pieces.continue_token));
	}
	buf_free(&whole.log);
	buf_free(&pieces.log);
	return 0;
}
