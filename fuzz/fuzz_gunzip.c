/*
 * fuzz_gunzip.c - the bounded gunzip of gzip'ed response bodies
 * (src/kube/stream.c) on any bytes, fed once whole and once in the pieces
 * of a chunk plan, and once in those pieces at a reader's pace
 * (gunzip_feed_upto, a room of 1 to 4,096 bytes a call): the same output
 * and the same verdict, never more output than the bound, and never more in
 * a call than its room.
 *
 * Input: one byte of chunk plan (fuzz_common.h), then the gzip data.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/stream.h"
#include "util/buf.h"

#define MAX_OUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_out(void *ctx, const char *data, size_t len)
{
	return buf_append(ctx, data, len) < 0 ? -1 : 0;
}

/* Inflate in pieces of the plan (NULL: in one piece); 0 or -1. */
static int inflate_all(struct buf *out, const char *in, size_t len, struct fz_chunks *plan)
{
	struct gunzip *g = gunzip_new(MAX_OUT, on_out, out);
	FZ_CHECK(g != NULL);
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0;) {
		size_t n = plan ? fz_chunks_next(plan, len - off) : len;
		rc = gunzip_feed(g, in + off, n);
		off += n;
	}
	if (rc == 0)
		rc = gunzip_finish(g);
	gunzip_free(g);
	FZ_CHECK(out->len <= MAX_OUT);
	return rc;
}

/* As inflate_all with a plan, each piece drained room bytes at a time. */
static int inflate_paced(struct buf *out, const char *in, size_t len, struct fz_chunks *plan,
			 size_t room)
{
	struct gunzip *g = gunzip_new(MAX_OUT, on_out, out);
	FZ_CHECK(g != NULL);
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0;) {
		size_t n = fz_chunks_next(plan, len - off);
		do {
			size_t before = out->len, used;
			rc = gunzip_feed_upto(g, in + off, n, room, &used);
			FZ_CHECK(out->len - before <= room && used <= n);
			off += used;
			n -= used;
		} while (rc == 1);
		FZ_CHECK(rc < 0 || n == 0);
	}
	if (rc == 0)
		rc = gunzip_finish(g);
	gunzip_free(g);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct fz_chunks plan;
	fz_chunks_init(&plan, data[0]);
	struct buf whole = BUF_INIT, pieces = BUF_INIT, paced = BUF_INIT;
	int a = inflate_all(&whole, (const char *)data + 1, size - 1, NULL);
	int b = inflate_all(&pieces, (const char *)data + 1, size - 1, &plan);
	FZ_CHECK(a == b);
	if (a == 0)
		FZ_CHECK(whole.len == pieces.len &&
			 (!whole.len || !memcmp(whole.data, pieces.data, whole.len)));
	fz_chunks_init(&plan, data[0]);
	int c = inflate_paced(&paced, (const char *)data + 1, size - 1, &plan,
			      1 + (size_t)data[0] * 16);
	FZ_CHECK(a == c);
	if (a == 0)
		FZ_CHECK(whole.len == paced.len &&
			 (!whole.len || !memcmp(whole.data, paced.data, whole.len)));
	buf_free(&whole);
	buf_free(&pieces);
	buf_free(&paced);
	return 0;
}
