/*
 * fuzz_watch_stream.c - the incremental watch decoder (src/kube/stream.c)
 * on any stream, fed once whole and once in the pieces of a chunk plan:
 * both must give the same events (type, object bytes and metadata, bookmark
 * and error details) and the same verdict, and every event's object must be
 * one JSON object.
 *
 * Input: one byte of chunk plan (fuzz_common.h), then the stream.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/stream.h"
#include "stream_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	struct buf log; /* the events, recorded */
	int rc;
};

static int on_event(void *ctx, const struct watch_event *ev)
{
	struct run *r = ctx;
	FZ_CHECK(ev->type >= WATCH_ADDED && ev->type <= WATCH_ERROR);
	FZ_CHECK(!ev->initial_events_end || ev->type == WATCH_BOOKMARK);
	FZ_CHECK(ev->error_code >= 0 && ev->error_code <= 999);
	FZ_CHECK(!ev->error_code || ev->type == WATCH_ERROR);
	if (buf_printf(&r->log, "%d/%d/%d;", (int)ev->type, (int)ev->initial_events_end,
		       ev->error_code) < 0)
		__builtin_trap();
	stream_check_object(&r->log, &ev->object);
	return 0;
}

/* Decode the stream in pieces of the plan (NULL: in one piece). */
static void decode(struct run *r, const char *s, size_t len, struct fz_chunks *plan)
{
	struct watch_decoder *d = watch_decoder_new(on_event, r);
	FZ_CHECK(d != NULL);
	r->rc = 0;
	for (size_t off = 0; off < len && r->rc == 0;) {
		size_t n = plan ? fz_chunks_next(plan, len - off) : len;
		r->rc = watch_decoder_feed(d, s + off, n);
		off += n;
	}
	if (r->rc == 0)
		r->rc = watch_decoder_finish(d);
	FZ_CHECK(r->rc == 0 || *watch_decoder_error(d));
	watch_decoder_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct fz_chunks plan;
	fz_chunks_init(&plan, data[0]);
	const char *s = (const char *)data + 1;
	size_t len = size - 1;

	struct run whole = {.log = BUF_INIT}, pieces = {.log = BUF_INIT};
	decode(&whole, s, len, NULL);
	decode(&pieces, s, len, &plan);
	FZ_CHECK(whole.rc == pieces.rc);
	FZ_CHECK(whole.log.len == pieces.log.len &&
		 (!whole.log.len || !memcmp(whole.log.data, pieces.log.data, whole.log.len)));
	buf_free(&whole.log);
	buf_free(&pieces.log);
	return 0;
}
