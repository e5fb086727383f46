/*
 * stream.h - incremental decoders for what the API server streams back:
 * a list ({"kind":"PodList","metadata":{...},"items":[...]}) and a watch
 * (one {"type":"ADDED","object":{...}} after another).
 *
 * They are fed the response body in whatever chunks it arrives, never hold
 * more than the item or event being decoded, and call back once per item or
 * event with its exact bytes (as the server sent them: no re-encoding) and
 * the metadata the cache needs.  One parse: the same pass validates the JSON,
 * finds the spans and picks the metadata.
 */
#ifndef YURTHUB_KUBE_STREAM_H
#define YURTHUB_KUBE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what the decoders accept, so that a broken or hostile upstream
 * costs bounded memory and time (feed returns -1 past one of them):
 * - no object (list item, watch event object) over STREAM_OBJECT_MAX bytes:
 *   etcd stores at most 1.5 MiB by default, so this is far above any real
 *   object, and it bounds the one copy the decoder keeps;
 * - no more than STREAM_OBJECT_MAX bytes without a JSON token ending: an
 *   endless string would be held whole, an endless run of whitespace (what
 *   a gzip bomb inflates to) would cost time; no number over 4 KiB;
 * - no nesting deeper than STREAM_DEPTH_MAX (encoding/json's own limit),
 *   which bounds yajl's stack of open containers. */
#define STREAM_OBJECT_MAX (8u << 20)
#define STREAM_DEPTH_MAX  10000

/* What the decoders pick from an object. Strings are NUL-terminated, "" when
 * absent, and valid only during the callback.  A name or namespace holding
 * "\u0000" is an error (-1): cut at the NUL it would name another object.
 * A decoder told to tolerate odd objects (*_decoder_tolerate_odd) hands
 * such an object out instead, with name and namespace "" and `odd` saying
 * why: a reader that only passes the bytes on (the response filters) need
 * not cut the whole answer for one object it cannot name. */
struct stream_object {
	const char *data; /* the object's bytes, exactly as received */
	size_t len;
	const char *name, *namespace;
	const char *resource_version; /* metadata.resourceVersion */
	uint64_t rv;		      /* parsed, 0 when absent/unparsable */
	const char *kind;
	const char *odd; /* NULL, or why the object's name cannot be read */
};

/* ---- lists ---- */

struct list_meta {
	char kind[64]; /* top-level kind, e.g. "PodList", "Status", "Table" */
	char resource_version[32];
	uint64_t rv;
	char *continue_token;	   /* malloc'ed, NULL when absent; owned by the decoder */
	long remaining_item_count; /* -1 when absent */
	size_t items;		   /* items seen */
};

/* Return 0 to go on; non-zero stops decoding (feed then returns -1). */
typedef int (*list_item_fn)(void *ctx, const struct stream_object *item);

/* The bytes of the body that are not inside the items array, exactly as
 * received and in order: everything up to and including its '[', then from
 * its ']' on (all of the body when there is no items array).  Called before
 * the items that follow them, so that envelope and items, written out in the
 * order they arrive, make up the body again - with items left out or
 * replaced, and separated by the writer's own commas.  0 to go on. */
typedef int (*list_envelope_fn)(void *ctx, const char *data, size_t len);

struct list_decoder;

struct list_decoder *list_decoder_new(list_item_fn on_item, void *ctx);
/* Ask for the envelope too (before the first feed). */
void list_decoder_on_envelope(struct list_decoder *d, list_envelope_fn fn);
/* Hand out an object with "\u0000" in its name or namespace (see struct
 * stream_object) rather than fail (before the first feed). */
void list_decoder_tolerate_odd(struct list_decoder *d);
/* 0, or -1 on malformed JSON / a stop from the callback / ENOMEM.  Once -1,
 * later calls return -1. */
int list_decoder_feed(struct list_decoder *d, const char *data, size_t len);
/* End of body: 0 when exactly one complete JSON object was seen (and *meta is
 * filled), -1 otherwise. */
int list_decoder_finish(struct list_decoder *d, struct list_meta *meta);
/* The metadata seen so far (useful before finish). */
const struct list_meta *list_decoder_meta(const struct list_decoder *d);
/* A one-line reason after -1 ("malformed JSON at byte 1234", ...). */
const char *list_decoder_error(const struct list_decoder *d);
void list_decoder_free(struct list_decoder *d);

/* ---- watches ---- */

enum watch_type { WATCH_ADDED, WATCH_MODIFIED, WATCH_DELETED, WATCH_BOOKMARK, WATCH_ERROR };

struct watch_event {
	enum watch_type type;
	struct stream_object object;
	bool initial_events_end; /* a BOOKMARK annotated k8s.io/initial-events-end=true */
	int error_code;		 /* WATCH_ERROR: the Status object's code (e.g. 410), else 0 */
};

typedef int (*watch_event_fn)(void *ctx, const struct watch_event *ev);

struct watch_decoder;

struct watch_decoder *watch_decoder_new(watch_event_fn on_event, void *ctx);
/* As list_decoder_tolerate_odd(), for an event's object. */
void watch_decoder_tolerate_odd(struct watch_decoder *w);
/* Events may be separated by newlines or nothing; an event whose type is
 * unknown or whose object is missing is an error (-1). */
int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len);
/* 0 when the stream ended between events, -1 when cut inside one. */
int watch_decoder_finish(struct watch_decoder *d);
const char *watch_decoder_error(const struct watch_decoder *d);
void watch_decoder_free(struct watch_decoder *d);

/* ---- gzip ---- */

/* Content-Encoding: gzip bodies are passed to clients untouched and inflated
 * only for the decoders.  Output is bounded: more than max_out bytes in all
 * is an error (a gzip bomb). */
typedef int (*inflate_out_fn)(void *ctx, const char *data, size_t len);

struct gunzip;

struct gunzip *gunzip_new(size_t max_out, inflate_out_fn out, void *ctx);
/* 0, or -1 on corrupt data, a stop from out, or too much output. */
int gunzip_feed(struct gunzip *g, const char *data, size_t len);
/* The same, but inflating no more than max_out bytes (out is called with at
 * most that much in all): a reader that takes the output at its own pace
 * never makes the hub hold what a few KB of gzip inflate to.  *used: the
 * bytes of data consumed.  1 when it stopped at max_out with more to give -
 * data past *used, or output zlib holds already (a call with len 0 gets
 * it) - 0 when data was consumed and inflated whole, -1 as gunzip_feed. */
int gunzip_feed_upto(struct gunzip *g, const char *data, size_t len, size_t max_out, size_t *used);
int gunzip_finish(struct gunzip *g); /* -1 if the stream was cut */
void gunzip_free(struct gunzip *g);

#endif
