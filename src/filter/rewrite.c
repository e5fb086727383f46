/*
 * rewrite.c - a response filtered as it streams, see rewrite.h.
 *
 * The stream decoders of kube/stream.h do the parsing that finds where each
 * object starts and ends (and for a list, the envelope around the items);
 * this file only decides, per object, whether its bytes go out as they are,
 * changed, or not at all.  jansson parses an object only when filter_wants()
 * says a filter might act on it.
 */
#include "filter/rewrite.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/stream.h"
#include "util/buf.h"
#include "util/log.h"

/* A gzip body inflates to at most this much: far above any real list, and
 * a bound on a gzip bomb. */
#define REWRITE_INFLATE_MAX (4ull << 30)

struct rewrite {
	enum rewrite_shape shape;
	filter_mask mask;
	char *group, *version, *resource;
	struct filter_target target;
	struct filter_env_ref env;
	rewrite_out_fn out;
	void *ctx;

	struct gunzip *gz;
	rewrite_room_fn room; /* NULL: the reader takes anything at once */
	struct buf held;      /* gzip input not inflated yet, from held_off on */
	size_t held_off;
	bool backlog; /* held has bytes, or zlib holds output: see inflate_some() */
	struct list_decoder *list;
	struct watch_decoder *watch;
	struct buf object; /* REWRITE_OBJECT: the body so far */

	size_t items_out;	   /* list: items written since the items' '[' */
	rewrite_event_fn on_event; /* watch: NULL, or who filters object events */
	void *on_event_ctx;
	uint64_t last_rv; /* watch: the newest resourceVersion an event carried */
	struct buf encoded;
	bool dropped, failed;
	unsigned long changed, ndropped;
	struct buf err;
};

static int fail(struct rewrite *rw, const char *why)
{
	if (!rw->failed) {
		rw->failed = true;
		buf_reset(&rw->err);
		buf_append_str(&rw->err, why);
	}
	return -1;
}

/* ---- one object ---- */

static int dump_to_buf(const char *data, size_t len, void *b)
{
	return buf_append(b, data, len);
}

/* Runs the filters on o.  FILTER_CHANGED leaves the new bytes in
 * rw->encoded.  An object no filter can read passes as it came
 * (FILTER_UNCHANGED), counted and logged (filter_unparsable_note): its name
 * holds a NUL (the decoder could not name it), jansson refuses it (a
 * number beyond 64 bits, a lone surrogate, nesting past jansson's depth,
 * none of which yajl minds), or a field a filter reads is not of its type.
 * One odd object must not cost the client the whole answer. */
static enum filter_result filter_object(struct rewrite *rw, const struct stream_object *o)
{
	const struct filter_env *env = rw->env.hold(rw->env.ctx);
	enum filter_result res = FILTER_UNCHANGED;
	enum filter_id by = filter_first_wanting(rw->mask, env, &rw->target, o);
	const char *odd = NULL;
	json_error_t jerr;
	if (by != FILTER_COUNT && o->odd) {
		odd = o->odd;
	} else if (by != FILTER_COUNT) {
		json_t *obj = json_loadb(o->data, o->len, JSON_ALLOW_NUL, &jerr);
		if (!obj) {
			odd = jerr.text;
		} else {
			res = filter_apply_by(rw->mask, env, &rw->target, obj, &by);
			buf_reset(&rw->encoded);
			if (res == FILTER_UNPARSABLE) {
				odd = "a field it reads is not of the type Kubernetes gives it";
				res = FILTER_UNCHANGED;
			} else if (res == FILTER_CHANGED &&
				   json_dump_callback(obj, dump_to_buf, &rw->encoded,
						      JSON_COMPACT) < 0) {
				/* out of memory: what a filter was for must not leak */
				res = FILTER_DROP;
			}
			json_decref(obj);
		}
	}
	rw->env.release(rw->env.ctx);
	if (odd)
		filter_unparsable_note(by, rw->resource, o->namespace, o->name, o->data, o->len,
				       odd);
	if (res == FILTER_CHANGED)
		rw->changed++;
	else if (res == FILTER_DROP)
		rw->ndropped++;
	return res;
}

static int emit(struct rewrite *rw, const char *data, size_t len)
{
	return rw->out(rw->ctx, data, len) ? fail(rw, "the reader stopped") : 0;
}

enum filter_result rewrite_one(struct rewrite *rw, const struct stream_object *o, const char **data,
			       size_t *len)
{
	enum filter_result res = filter_object(rw, o);
	*data = res == FILTER_CHANGED ? rw->encoded.data : o->data;
	*len = res == FILTER_CHANGED ? rw->encoded.len : o->len;
	return res;
}

/* ---- lists ---- */

static int on_envelope(void *ctx, const char *data, size_t len)
{
	struct rewrite *rw = ctx;
	rw->items_out = 0; /* only the items' '[' is ever followed by items */
	return emit(rw, data, len);
}

static int on_item(void *ctx, const struct stream_object *o)
{
	struct rewrite *rw = ctx;
	enum filter_result res = filter_object(rw, o);
	if (res == FILTER_DROP)
		return 0;
	if (rw->items_out++ && emit(rw, ",", 1) < 0)
		return -1;
	if (res == FILTER_CHANGED)
		return emit(rw, rw->encoded.data, rw->encoded.len);
	return emit(rw, o->data, o->len);
}

/* ---- watches ---- */

static const char *const event_types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

int rewrite_emit_event(struct rewrite *rw, enum watch_type type, const char *obj, size_t len)
{
	char head[40];
	int n = snprintf(head, sizeof head, "{\"type\":\"%s\",\"object\":", event_types[type]);
	if (emit(rw, head, (size_t)n) < 0 || emit(rw, obj, len) < 0)
		return -1;
	return emit(rw, "}\n", 2);
}

static int on_event(void *ctx, const struct watch_event *ev)
{
	struct rewrite *rw = ctx;
	const struct stream_object *o = &ev->object;
	if (ev->type != WATCH_ERROR && o->rv > rw->last_rv)
		rw->last_rv = o->rv;
	if (ev->type == WATCH_BOOKMARK || ev->type == WATCH_ERROR)
		return rewrite_emit_event(rw, ev->type, o->data, o->len);
	if (rw->on_event)
		return rw->on_event(rw->on_event_ctx, ev->type, o) ? fail(rw, "the reader stopped")
								   : 0;
	switch (filter_object(rw, o)) {
	case FILTER_DROP: /* gone for this node: as if deleted, as it was */
		return rewrite_emit_event(rw, WATCH_DELETED, o->data, o->len);
	case FILTER_CHANGED:
		return rewrite_emit_event(rw, ev->type, rw->encoded.data, rw->encoded.len);
	default:
		return rewrite_emit_event(rw, ev->type, o->data, o->len);
	}
}

/* ---- single objects ---- */

/* A stream_object for filter_object(), named from the parsed body. */
static const char *meta_string(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
	return s ? s : "";
}

/* Is data one JSON object, by the stream decoders' grammar and bounds
 * (jansson refuses some of what they accept)? */
static bool is_json_object(const char *data, size_t len)
{
	struct list_decoder *d = list_decoder_new(NULL, NULL);
	if (d)
		list_decoder_tolerate_odd(d);
	bool ok = d && list_decoder_feed(d, data, len) == 0 && list_decoder_finish(d, NULL) == 0;
	list_decoder_free(d);
	return ok; /* the list decoder takes any one object: a list is one */
}

static int finish_object(struct rewrite *rw)
{
	json_error_t jerr;
	struct stream_object o = {.data = rw->object.data, .len = rw->object.len};
	json_t *obj = json_loadb(rw->object.data, rw->object.len, JSON_ALLOW_NUL, &jerr);
	if (obj && !json_is_object(obj)) {
		json_decref(obj);
		return fail(rw, "the body is not a JSON object");
	}
	if (!obj) {
		if (!is_json_object(rw->object.data, rw->object.len))
			return fail(rw, "the body is not a JSON object");
		o.name = o.namespace = o.resource_version = o.kind = "";
	} else {
		o.name = meta_string(obj, "name");
		o.namespace = meta_string(obj, "namespace");
		o.resource_version = meta_string(obj, "resourceVersion");
		o.kind = json_string_value(json_object_get(obj, "kind"));
		if (!o.kind)
			o.kind = "";
		if (strlen(o.name) != json_string_length(json_object_get(
					  json_object_get(obj, "metadata"), "name")) ||
		    strlen(o.namespace) != json_string_length(json_object_get(
					       json_object_get(obj, "metadata"), "namespace"))) {
			o.odd = "a NUL byte in its name or namespace";
			o.name = o.namespace = "";
		}
	}
	enum filter_result res = filter_object(rw, &o);
	json_decref(obj);
	if (res == FILTER_DROP) {
		rw->dropped = true;
		return 0;
	}
	if (res == FILTER_CHANGED)
		return emit(rw, rw->encoded.data, rw->encoded.len);
	return emit(rw, rw->object.data, rw->object.len);
}

/* ---- feeding ---- */

static int decode(void *ctx, const char *data, size_t len)
{
	struct rewrite *rw = ctx;
	switch (rw->shape) {
	case REWRITE_LIST:
		if (list_decoder_feed(rw->list, data, len) < 0)
			return fail(rw, list_decoder_error(rw->list));
		return 0;
	case REWRITE_WATCH:
		if (watch_decoder_feed(rw->watch, data, len) < 0)
			return fail(rw, watch_decoder_error(rw->watch));
		return 0;
	default:
		if (rw->object.len + len > STREAM_OBJECT_MAX)
			return fail(rw, "an object larger than 8 MiB");
		return buf_append(&rw->object, data, len) < 0 ? fail(rw, "out of memory") : 0;
	}
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

struct rewrite *rewrite_new(enum rewrite_shape shape, bool gzipped, filter_mask mask,
			    const struct filter_target *t, const struct filter_env_ref *env,
			    rewrite_out_fn out, void *ctx)
{
	struct rewrite *rw = calloc(1, sizeof *rw);
	if (!rw)
		return NULL;
	rw->shape = shape;
	rw->mask = mask;
	rw->env = *env;
	rw->out = out;
	rw->ctx = ctx;
	rw->group = dup_or_empty(t->group);
	rw->version = dup_or_empty(t->version);
	rw->resource = dup_or_empty(t->resource);
	rw->target = (struct filter_target){rw->group, rw->version, rw->resource};
	bool ok = rw->group && rw->version && rw->resource;
	if (ok && shape == REWRITE_LIST) {
		ok = (rw->list = list_decoder_new(on_item, rw)) != NULL;
		if (ok) {
			list_decoder_on_envelope(rw->list, on_envelope);
			list_decoder_tolerate_odd(rw->list);
		}
	} else if (ok && shape == REWRITE_WATCH) {
		ok = (rw->watch = watch_decoder_new(on_event, rw)) != NULL;
		if (ok)
			watch_decoder_tolerate_odd(rw->watch);
	}
	if (ok && gzipped)
		ok = (rw->gz = gunzip_new(REWRITE_INFLATE_MAX, decode, rw)) != NULL;
	if (!ok) {
		rewrite_free(rw);
		return NULL;
	}
	return rw;
}

void rewrite_set_room(struct rewrite *rw, rewrite_room_fn room)
{
	rw->room = room;
}

void rewrite_on_event(struct rewrite *rw, rewrite_event_fn fn, void *ctx)
{
	rw->on_event = fn;
	rw->on_event_ctx = ctx;
}

uint64_t rewrite_last_rv(const struct rewrite *rw)
{
	return rw->last_rv;
}

/* Inflates data while the reader has room, at most that much at a time: a
 * few KB of gzip may inflate to a hundred MB, which must wait in its gzip
 * form until the reader takes what came before.  *used: what of data
 * went in; rw->backlog says whether more is to come from it.  all: inflate
 * everything, room or not (the end of the body, for a reader without a
 * pace). */
static int inflate_some(struct rewrite *rw, const char *data, size_t len, size_t *used, bool all)
{
	*used = 0;
	for (;;) {
		size_t room = rw->room && !all ? rw->room(rw->ctx) : SIZE_MAX;
		if (!room) {
			rw->backlog = true;
			return 0;
		}
		size_t n;
		int rc = gunzip_feed_upto(rw->gz, data + *used, len - *used, room, &n);
		*used += n;
		if (rc < 0)
			return fail(rw, "broken gzip stream"); /* or the decoder's reason, first */
		if (rc == 0) {
			rw->backlog = false;
			return 0;
		}
	}
}

/* Inflate what is held, as far as the reader has room (all: all of it). */
static int inflate_held(struct rewrite *rw, bool all)
{
	size_t used;
	int rc = inflate_some(rw, rw->held.data ? rw->held.data + rw->held_off : "",
			      rw->held.len - rw->held_off, &used, all);
	rw->held_off += used;
	if (rw->held_off == rw->held.len) {
		buf_reset(&rw->held);
		rw->held_off = 0;
	}
	return rc;
}

int rewrite_feed(struct rewrite *rw, const char *data, size_t len)
{
	if (rw->failed)
		return -1;
	if (!rw->gz)
		return decode(rw, data, len);
	size_t used = 0;
	/* after what waits, in order */
	if (!rw->backlog && inflate_some(rw, data, len, &used, false) < 0)
		return -1;
	if (used < len && buf_append(&rw->held, data + used, len - used) < 0)
		return fail(rw, "out of memory");
	if (used < len)
		rw->backlog = true;
	return 0;
}

bool rewrite_backlog(const struct rewrite *rw)
{
	return rw->backlog && !rw->failed;
}

int rewrite_resume(struct rewrite *rw)
{
	if (rw->failed)
		return -1;
	return rw->backlog ? inflate_held(rw, false) : 0;
}

int rewrite_finish(struct rewrite *rw)
{
	if (rw->failed)
		return -1;
	if (rw->backlog && inflate_held(rw, true) < 0)
		return -1;
	if (rw->gz && gunzip_finish(rw->gz) < 0)
		return fail(rw, "gzip stream cut short");
	switch (rw->shape) {
	case REWRITE_LIST:
		if (list_decoder_finish(rw->list, NULL) < 0)
			return fail(rw, list_decoder_error(rw->list));
		return 0;
	case REWRITE_WATCH:
		if (watch_decoder_finish(rw->watch) < 0)
			return fail(rw, watch_decoder_error(rw->watch));
		return 0;
	default:
		return finish_object(rw);
	}
}

bool rewrite_dropped(const struct rewrite *rw)
{
	return rw->dropped;
}

void rewrite_counts(const struct rewrite *rw, unsigned long *changed, unsigned long *dropped)
{
	*changed = rw->changed;
	*dropped = rw->ndropped;
}

const char *rewrite_error(const struct rewrite *rw)
{
	return rw->failed ? buf_cstr(&rw->err) : "";
}

void rewrite_free(struct rewrite *rw)
{
	if (!rw)
		return;
	gunzip_free(rw->gz);
	list_decoder_free(rw->list);
	watch_decoder_free(rw->watch);
	buf_free(&rw->object);
	buf_free(&rw->held);
	buf_free(&rw->encoded);
	buf_free(&rw->err);
	free(rw->group);
	free(rw->version);
	free(rw->resource);
	free(rw);
}
