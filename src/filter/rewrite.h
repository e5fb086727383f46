/*
 * rewrite.h - one response of the cloud, filtered as it streams.
 *
 * The proxy feeds the body as it arrives and gets the filtered body back
 * through a callback, object by object: a list is never held whole (only the
 * item being decoded), a watch event goes out as soon as it is decoded.  An
 * object no filter wants passes on as its own bytes; one a filter changes is
 * parsed into a private copy, changed and encoded again, so that nothing
 * another reader shares is ever written.  A gzip body is inflated on the
 * way: what comes out is plain JSON (the proxy drops Content-Encoding and
 * Content-Length).
 *
 *   list:   the envelope as received, the items that remain, "," between
 *   watch:  one event per line; an event whose object a filter drops
 *           becomes DELETED with the object as the cloud sent it; BOOKMARK
 *           and ERROR pass unchanged
 *   object: (get, patch, ...) gathered whole - one object is small - and
 *           written at the end, unless a filter drops it: then the proxy
 *           answers 404, as for a list that leaves it out
 *
 * No I/O and no locks of its own: what the filters know of the node comes
 * through struct filter_env_ref, held for each object only.
 */
#ifndef YURTHUB_FILTER_REWRITE_H
#define YURTHUB_FILTER_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/filter.h"
#include "kube/stream.h"

/* Access to the current struct filter_env: hold() returns it and keeps it
 * valid until release(). */
struct filter_env_ref {
	const struct filter_env *(*hold)(void *ctx);
	void (*release)(void *ctx);
	void *ctx;
};

enum rewrite_shape { REWRITE_LIST, REWRITE_WATCH, REWRITE_OBJECT };

/* Filtered bytes for the client; 0 to go on, non-zero stops (feed then
 * fails). */
typedef int (*rewrite_out_fn)(void *ctx, const char *data, size_t len);

struct rewrite;

/* A rewriter for one response; t is copied.  gzipped: the body is gzip.
 * NULL when out of memory. */
struct rewrite *rewrite_new(enum rewrite_shape shape, bool gzipped, filter_mask mask,
			    const struct filter_target *t, const struct filter_env_ref *env,
			    rewrite_out_fn out, void *ctx);
/* How many more bytes the reader takes now (0: none until it reads). */
typedef size_t (*rewrite_room_fn)(void *ctx);
/* A gzip body is then inflated only while room(ctx) is not 0, and no more
 * than it says at a time (its output may come out later, and in one piece
 * with what a decoder held: an item, at most STREAM_OBJECT_MAX).  What was
 * fed and not inflated is held (a copy) until rewrite_resume(). */
void rewrite_set_room(struct rewrite *rw, rewrite_room_fn room);
/* REWRITE_WATCH: the ADDED, MODIFIED and DELETED events go to fn, with
 * their object as the cloud sent it, instead of through rw's filters: a
 * follow (filter/follow.h) filters them, remembers what it showed, and
 * writes them with rewrite_emit_event().  fn returns non-zero to stop. */
typedef int (*rewrite_event_fn)(void *ctx, enum watch_type type, const struct stream_object *o);
void rewrite_on_event(struct rewrite *rw, rewrite_event_fn fn, void *ctx);
/* One watch event line to rw's reader: 0, or -1 when it stopped. */
int rewrite_emit_event(struct rewrite *rw, enum watch_type type, const char *obj, size_t len);
/* REWRITE_WATCH: the newest resourceVersion an event (or bookmark) carried
 * so far, 0 before any. */
uint64_t rewrite_last_rv(const struct rewrite *rw);
/* 0, or -1: the body is not what its shape says (malformed JSON, a list
 * item that is not an object, an object over STREAM_OBJECT_MAX, a broken
 * gzip stream) or out stopped.  Once -1, always -1.  While there is a
 * backlog, data only joins it: the caller should feed no more then (the
 * proxy pauses the transfer), which bounds it by what was fed last. */
int rewrite_feed(struct rewrite *rw, const char *data, size_t len);
/* gzip input (or output zlib holds) waits for room. */
bool rewrite_backlog(const struct rewrite *rw);
/* Go on inflating the backlog while the reader has room: 0, or -1 as
 * rewrite_feed. */
int rewrite_resume(struct rewrite *rw);
/* End of the body: 0 when it was complete, else -1.  An object is written
 * out here (unless dropped).  A backlog is inflated here whole, room or
 * not: a reader with a pace drains it with rewrite_resume() first. */
int rewrite_finish(struct rewrite *rw);
/* REWRITE_OBJECT, after finish: a filter dropped the object. */
bool rewrite_dropped(const struct rewrite *rw);
/* Objects changed and dropped so far (for the metrics). */
void rewrite_counts(const struct rewrite *rw, unsigned long *changed, unsigned long *dropped);
/* One object through rw's filters by itself, outside the body (counted
 * as the body's are): FILTER_UNCHANGED with *data, *len = o's bytes,
 * FILTER_CHANGED with the new bytes (valid until the next call on rw), or
 * FILTER_DROP.  For a watch that re-filters what it showed (filter/follow.h). */
enum filter_result rewrite_one(struct rewrite *rw, const struct stream_object *o, const char **data,
			       size_t *len);
/* A one-line reason after -1. */
const char *rewrite_error(const struct rewrite *rw);
void rewrite_free(struct rewrite *rw);

#endif
