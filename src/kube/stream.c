/*
 * stream.c - the list and watch decoders and the bounded gunzip of stream.h.
 *
 * One pass of util/json_scan per body.  Inside a callback,
 * json_scan_consumed() is the offset just past the token being reported
 * within the chunk being fed; braces are one-byte tokens that never
 * straddle chunks, so an object's '{' is at that offset - 1 in its
 * JSON_MAP_START and its '}' likewise in its JSON_MAP_END (both checked).
 * An object lying in one chunk is handed out in place; one spanning chunks
 * is gathered in `held`, the only copy, which never holds more than one
 * object.
 *
 * Of an object, only its kind, code, metadata and metadata.annotations are
 * read: every other container in it is skipped (JSON_SCAN_SKIP), which the
 * scanner checks without calling back.  That is what makes decoding a
 * list cheap: most of a pod is its spec and status.
 *
 * The bounds of stream.h are the scanner's limits (depth, bytes without a
 * token ending, a number's length) and are checked as an object's bytes
 * are kept (span_save, span_end), so that the verdict is the same however
 * the body is cut into chunks.
 *
 * list_meta.kind is truncated to 63 bytes (on a UTF-8 boundary): it is only
 * informational.  A list resourceVersion longer than 31 bytes is rejected
 * (-1): a truncated one would name another revision.  A watch event with two
 * "object" keys is rejected too.
 */
#include "kube/stream.h"
#include "kube/stream_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST
#include <zlib.h>

#include "kube/meta.h"
#include "util/buf.h"
#include "util/json_scan.h"

#define NUMBER_MAX (4u << 10)

/* What the next value means, named by the latest key. */
enum slot {
	SLOT_NONE,
	SLOT_LIST_KIND, /* list: top level */
	SLOT_LIST_META,
	SLOT_ITEMS,
	SLOT_LIST_RV, /* list: top-level metadata */
	SLOT_CONTINUE,
	SLOT_REMAINING,
	SLOT_TYPE, /* watch: event */
	SLOT_OBJECT,
	SLOT_KIND, /* item or event object */
	SLOT_META,
	SLOT_CODE,
	SLOT_NAME, /* its metadata */
	SLOT_NAMESPACE,
	SLOT_RV,
	SLOT_ANNOTATIONS,
	SLOT_INITIAL_END, /* its metadata.annotations */
};

enum vtype { V_NULL, V_BOOL, V_NUMBER, V_STRING, V_MAP, V_ARRAY };

/* Where the current object's bytes are: [start, end) of the current chunk,
 * or (in_held) gathered in held. */
struct span {
	struct buf held;
	size_t start, end;
	bool open;    /* '{' seen, '}' not yet */
	bool done;    /* '}' seen */
	bool in_held; /* the bytes so far are in held */
};

/* What is picked from the object being decoded. */
struct pick {
	struct buf name, namespace, rv, kind;
	bool in_meta, in_annotations, initial_end;
	long code;
	const char *odd; /* see struct stream_object */
};

/* State common to both decoders; the first member of each. */
struct core {
	struct json_scan *js;
	bool is_watch;
	size_t obj_depth; /* depth at which the object's own keys arrive */
	const char *chunk;
	size_t chunk_len;
	unsigned long long fed; /* bytes before the current chunk */
	bool at_end;		/* in finish: errors are at byte `fed` */
	size_t depth;		/* open containers */
	enum slot slot;
	bool in_obj;
	struct span span;
	struct pick pick;
	bool failed;
	bool tolerate_odd; /* see list_decoder_tolerate_odd() */
	struct buf err;
};

struct list_decoder {
	struct core c;
	list_item_fn on_item;
	list_envelope_fn on_envelope;
	void *ctx;
	struct list_meta meta;
	bool in_list_meta, in_items;
	size_t envelope_from; /* in the current chunk: envelope not handed out yet */
};

struct watch_decoder {
	struct core c;
	watch_event_fn on_event;
	void *ctx;
	int type; /* enum watch_type, -1 before "type" */
	bool has_object;
};

/* ---- errors ---- */

/* Records the first error as "<what> at byte N[: detail]", on one line;
 * returns 0 (JSON_SCAN_STOP) so that callbacks can stop the scan with it. */
static unsigned long long position(const struct core *c);

static int fail_detail(struct core *c, const char *what, const char *detail, size_t len)
{
	unsigned long long at = position(c);

	if (c->failed)
		return 0;
	c->failed = true;
	buf_reset(&c->err);
	if (buf_printf(&c->err, "%s at byte %llu", what, at) < 0 || !detail)
		return 0;
	buf_append_str(&c->err, ": ");
	for (size_t i = 0; i < len && i < 80; i++)
		buf_append_char(&c->err, (unsigned char)detail[i] < 0x20 ? '?' : detail[i]);
	return 0;
}

static int fail(struct core *c, const char *what)
{
	return fail_detail(c, what, NULL, 0);
}

/* The scanner refused the input (or a callback stopped it): -1 with a
 * message. */
static int parse_failed(struct core *c)
{
	const char *detail;

	if (c->failed)
		return -1;
	switch (json_scan_error(c->js, &detail)) {
	case JSON_SCAN_TOO_DEEP:
		return fail(c, "JSON nested too deep") - 1;
	case JSON_SCAN_NO_TOKEN_END:
		return fail(c, "no JSON token ends within 8 MiB") - 1;
	case JSON_SCAN_NUMBER_TOO_LONG:
		return fail(c, "a JSON number longer than 4 KiB") - 1;
	case JSON_SCAN_NO_MEMORY:
		return fail(c, "out of memory") - 1;
	default:
		return fail_detail(c, "malformed JSON", detail, detail ? strlen(detail) : 0) - 1;
	}
}

/* Where the scanner is in the body; between feeds, the end of the input. */
static unsigned long long position(const struct core *c)
{
	return c->at_end ? c->fed : json_scan_position(c->js);
}

static const char *core_error(const struct core *c)
{
	if (!c->failed)
		return "";
	return c->err.len ? c->err.data : "out of memory";
}

/* ---- spans ---- */

static void span_clear(struct span *s)
{
	buf_reset(&s->held);
	s->open = s->done = s->in_held = false;
}

/* start_map of the object: its '{' is the byte just consumed. */
static int span_begin(struct core *c)
{
	size_t at = json_scan_consumed(c->js);

	if (at == 0 || at > c->chunk_len || c->chunk[at - 1] != '{')
		return fail(c, "internal error: lost an object's '{'");
	span_clear(&c->span);
	c->span.start = at - 1;
	c->span.open = true;
	return 1;
}

/* end_map of the object: its '}' is the byte just consumed. */
static int span_end(struct core *c)
{
	struct span *s = &c->span;
	size_t at = json_scan_consumed(c->js);

	if (at == 0 || at > c->chunk_len || c->chunk[at - 1] != '}')
		return fail(c, "internal error: lost an object's '}'");
	if ((s->in_held ? s->held.len + at : at - s->start) > STREAM_OBJECT_MAX)
		return fail(c, "an object larger than 8 MiB");
	if (s->in_held && buf_append(&s->held, c->chunk, at) < 0)
		return fail(c, "out of memory");
	s->end = at;
	s->open = false;
	s->done = true;
	return 1;
}

/* End of a chunk: keep what of the object lies in it. */
static int span_save(struct core *c)
{
	struct span *s = &c->span;
	size_t from, to;

	if ((!s->open && !s->done) || (s->done && s->in_held))
		return 1;
	from = s->in_held ? 0 : s->start;
	to = s->done ? s->end : c->chunk_len;
	if (s->held.len + (to - from) > STREAM_OBJECT_MAX)
		return fail(c, "an object larger than 8 MiB");
	if (buf_append(&s->held, c->chunk + from, to - from) < 0)
		return fail(c, "out of memory");
	s->in_held = true;
	return 1;
}

/* ---- picking an object's metadata ---- */

static bool key_is(const char *key, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(key, want, len) == 0;
}

static void pick_reset(struct pick *p)
{
	buf_reset(&p->name);
	buf_reset(&p->namespace);
	buf_reset(&p->rv);
	buf_reset(&p->kind);
	p->in_meta = p->in_annotations = p->initial_end = false;
	p->code = 0;
	p->odd = NULL;
}

static void pick_free(struct pick *p)
{
	buf_free(&p->name);
	buf_free(&p->namespace);
	buf_free(&p->rv);
	buf_free(&p->kind);
}

static enum slot pick_key_slot(const struct core *c, const char *k, size_t len)
{
	if (c->depth == c->obj_depth) {
		if (key_is(k, len, "kind"))
			return SLOT_KIND;
		if (key_is(k, len, "metadata"))
			return SLOT_META;
		if (key_is(k, len, "code"))
			return SLOT_CODE;
	} else if (c->depth == c->obj_depth + 1 && c->pick.in_meta) {
		if (key_is(k, len, "name"))
			return SLOT_NAME;
		if (key_is(k, len, "namespace"))
			return SLOT_NAMESPACE;
		if (key_is(k, len, "resourceVersion"))
			return SLOT_RV;
		if (key_is(k, len, "annotations"))
			return SLOT_ANNOTATIONS;
	} else if (c->depth == c->obj_depth + 2 && c->pick.in_annotations) {
		if (key_is(k, len, "k8s.io/initial-events-end"))
			return SLOT_INITIAL_END;
	}
	return SLOT_NONE;
}

/* A JSON integer that fits a long: 0 and *out, else -1. */
static int parse_long(const char *s, size_t len, long *out)
{
	char tmp[32], *end;
	long v;

	if (len == 0 || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	errno = 0;
	v = strtol(tmp, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int keep(struct core *c, struct buf *b, const char *s, size_t len)
{
	buf_reset(b);
	if (buf_append(b, s, len) < 0)
		return fail(c, "out of memory");
	return 1;
}

static struct buf *pick_string_field(struct pick *p, enum slot slot)
{
	switch (slot) {
	case SLOT_KIND:
		return &p->kind;
	case SLOT_NAME:
		return &p->name;
	case SLOT_NAMESPACE:
		return &p->namespace;
	case SLOT_RV:
		return &p->rv;
	default:
		return NULL;
	}
}

/* A value inside the object.  Fields of the wrong type are ignored. */
static int pick_value(struct core *c, enum slot slot, enum vtype t, const char *s, size_t len)
{
	struct pick *p = &c->pick;
	struct buf *field;
	long code;

	if (t == V_MAP && slot == SLOT_META)
		p->in_meta = true;
	else if (t == V_MAP && slot == SLOT_ANNOTATIONS)
		p->in_annotations = true;
	else if (t == V_NUMBER && slot == SLOT_CODE)
		p->code = parse_long(s, len, &code) == 0 && code >= 0 && code <= 999 ? code : 0;
	else if (t == V_STRING && slot == SLOT_INITIAL_END)
		p->initial_end = len == 4 && memcmp(s, "true", 4) == 0;
	else if (t == V_STRING && (slot == SLOT_NAME || slot == SLOT_NAMESPACE) &&
		 memchr(s, '\0', len)) {
		if (!c->tolerate_odd)
			return fail_detail(c, "a NUL byte in an object's name or namespace", s,
					   len);
		p->odd = "a NUL byte in its name or namespace";
	} else if (t == V_STRING && (field = pick_string_field(p, slot)))
		return keep(c, field, s, len);
	return 1;
}

/* A container inside the object closed; depth is already decremented. */
static void pick_end(struct core *c)
{
	if (c->depth == c->obj_depth)
		c->pick.in_meta = false;
	else if (c->depth == c->obj_depth + 1)
		c->pick.in_annotations = false;
}

static void pick_fill(struct core *c, struct stream_object *o)
{
	struct span *s = &c->span;
	struct pick *p = &c->pick;

	if (s->in_held) {
		o->data = s->held.data;
		o->len = s->held.len;
	} else {
		o->data = c->chunk + s->start;
		o->len = s->end - s->start;
	}
	o->name = buf_cstr(&p->name);
	o->namespace = buf_cstr(&p->namespace);
	o->resource_version = buf_cstr(&p->rv);
	kube_rv_parse(p->rv.data, p->rv.len, &o->rv);
	o->kind = buf_cstr(&p->kind);
	o->odd = p->odd;
	if (p->odd) /* whatever of them was kept is not its name */
		o->name = o->namespace = "";
}

static int begin_object(struct core *c)
{
	if (!span_begin(c))
		return 0;
	pick_reset(&c->pick);
	c->in_obj = true;
	return 1;
}

/* ---- the list ---- */

static enum slot list_key_slot(const struct list_decoder *d, const char *k, size_t len)
{
	if (d->c.depth == 1) {
		if (key_is(k, len, "kind"))
			return SLOT_LIST_KIND;
		if (key_is(k, len, "metadata"))
			return SLOT_LIST_META;
		if (key_is(k, len, "items"))
			return SLOT_ITEMS;
	} else if (d->c.depth == 2 && d->in_list_meta) {
		if (key_is(k, len, "resourceVersion"))
			return SLOT_LIST_RV;
		if (key_is(k, len, "continue"))
			return SLOT_CONTINUE;
		if (key_is(k, len, "remainingItemCount"))
			return SLOT_REMAINING;
	}
	return SLOT_NONE;
}

/* Truncated to fit, without splitting a UTF-8 sequence. */
static void set_kind(struct list_meta *m, const char *s, size_t len)
{
	size_t n = len;

	if (n >= sizeof(m->kind)) {
		n = sizeof(m->kind) - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(m->kind, s, n);
	m->kind[n] = '\0';
}

static int set_list_rv(struct list_decoder *d, const char *s, size_t len)
{
	struct list_meta *m = &d->meta;

	if (len >= sizeof(m->resource_version))
		return fail(&d->c, "list resourceVersion too long");
	memcpy(m->resource_version, s, len);
	m->resource_version[len] = '\0';
	kube_rv_parse(s, len, &m->rv);
	return 1;
}

static int set_continue(struct list_decoder *d, const char *s, size_t len)
{
	char *copy = malloc(len + 1);

	if (!copy)
		return fail(&d->c, "out of memory");
	memcpy(copy, s, len);
	copy[len] = '\0';
	free(d->meta.continue_token); /* a duplicate key: the last one wins */
	d->meta.continue_token = copy;
	return 1;
}

static int set_remaining(struct list_decoder *d, const char *s, size_t len)
{
	if (parse_long(s, len, &d->meta.remaining_item_count) < 0)
		return fail(&d->c, "remainingItemCount is not an integer");
	return 1;
}

/* Hands out the envelope of the current chunk from envelope_from up to
 * `to` (the items' '[' included). */
static int envelope_upto(struct list_decoder *d, size_t to)
{
	struct core *c = &d->c;

	if (d->on_envelope && to > d->envelope_from &&
	    d->on_envelope(d->ctx, c->chunk + d->envelope_from, to - d->envelope_from))
		return fail(c, "stopped by the envelope callback");
	d->envelope_from = to;
	return 1;
}

/* The items' ']' was just consumed: the envelope goes on from it. */
static void envelope_resume(struct list_decoder *d)
{
	d->envelope_from = json_scan_consumed(d->c.js) - 1;
}

/* A value of the list outside any item. */
static int list_value(struct list_decoder *d, enum slot slot, enum vtype t, const char *s,
		      size_t len)
{
	struct core *c = &d->c;

	switch (slot) {
	case SLOT_LIST_KIND:
		if (t != V_STRING)
			return fail(c, "list kind is not a string");
		set_kind(&d->meta, s, len);
		return 1;
	case SLOT_LIST_META:
		d->in_list_meta = t == V_MAP;
		return t == V_MAP || t == V_NULL ? 1 : fail(c, "list metadata is not an object");
	case SLOT_ITEMS:
		d->in_items = t == V_ARRAY;
		if (d->in_items && !envelope_upto(d, json_scan_consumed(c->js)))
			return 0;
		return t == V_ARRAY || t == V_NULL ? 1 : fail(c, "list items is not an array");
	case SLOT_LIST_RV:
		return t == V_STRING ? set_list_rv(d, s, len)
				     : fail(c, "list resourceVersion is not a string");
	case SLOT_CONTINUE:
		return t == V_STRING ? set_continue(d, s, len)
				     : fail(c, "continue is not a string");
	case SLOT_REMAINING:
		return t == V_NUMBER ? set_remaining(d, s, len)
				     : fail(c, "remainingItemCount is not a number");
	default:
		if (c->depth == 2 && d->in_items)
			return t == V_MAP ? begin_object(c)
					  : fail(c, "a list item is not an object");
		return 1;
	}
}

static int emit_item(struct list_decoder *d)
{
	struct stream_object o;
	int stop;

	pick_fill(&d->c, &o);
	d->meta.items++;
	stop = d->on_item ? d->on_item(d->ctx, &o) : 0;
	span_clear(&d->c.span);
	return stop ? fail(&d->c, "stopped by the item callback") : 1;
}

/* ---- the watch ---- */

static enum slot watch_key_slot(const struct core *c, const char *k, size_t len)
{
	if (c->depth != 1)
		return SLOT_NONE;
	if (key_is(k, len, "type"))
		return SLOT_TYPE;
	if (key_is(k, len, "object"))
		return SLOT_OBJECT;
	return SLOT_NONE;
}

static int set_type(struct watch_decoder *w, const char *s, size_t len)
{
	static const char *const names[] = {
	    [WATCH_ADDED] = "ADDED",	 [WATCH_MODIFIED] = "MODIFIED",
	    [WATCH_DELETED] = "DELETED", [WATCH_BOOKMARK] = "BOOKMARK",
	    [WATCH_ERROR] = "ERROR",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (key_is(s, len, names[i])) {
			w->type = (int)i;
			return 1;
		}
	}
	return fail_detail(&w->c, "unknown watch event type", s, len);
}

/* A value of the event outside its object. */
static int watch_value(struct watch_decoder *w, enum slot slot, enum vtype t, const char *s,
		       size_t len)
{
	struct core *c = &w->c;

	if (slot == SLOT_TYPE)
		return t == V_STRING ? set_type(w, s, len)
				     : fail(c, "watch event type is not a string");
	if (slot != SLOT_OBJECT)
		return 1;
	if (t != V_MAP)
		return fail(c, "watch event object is not an object");
	if (w->has_object)
		return fail(c, "watch event with two objects");
	w->has_object = true;
	return begin_object(c);
}

static void begin_event(struct watch_decoder *w)
{
	w->type = -1;
	w->has_object = false;
	span_clear(&w->c.span);
}

static int end_event(struct watch_decoder *w)
{
	struct core *c = &w->c;
	struct watch_event ev = {0};
	int stop;

	if (!w->has_object)
		return fail(c, "watch event without an object");
	if (w->type < 0)
		return fail(c, "watch event without a type");
	ev.type = (enum watch_type)w->type;
	pick_fill(c, &ev.object);
	ev.initial_events_end = ev.type == WATCH_BOOKMARK && c->pick.initial_end;
	ev.error_code = ev.type == WATCH_ERROR ? (int)c->pick.code : 0;
	stop = w->on_event ? w->on_event(w->ctx, &ev) : 0;
	begin_event(w);
	return stop ? fail(c, "stopped by the event callback") : 1;
}

/* ---- the scanner's callback, shared by both decoders ---- */

static int on_value(struct core *c, enum vtype t, const char *s, size_t len)
{
	enum slot slot = c->slot;

	c->slot = SLOT_NONE;
	if (c->depth == 0) {
		if (t != V_MAP)
			return fail(c, "not a JSON object");
		if (c->is_watch)
			begin_event((struct watch_decoder *)c);
		return 1;
	}
	if (c->in_obj)
		return pick_value(c, slot, t, s, len);
	if (c->is_watch)
		return watch_value((struct watch_decoder *)c, slot, t, s, len);
	return list_value((struct list_decoder *)c, slot, t, s, len);
}

/* Inside an object, only its metadata and annotations maps are read: the
 * scanner checks every other container without calling back. */
static int open_container(struct core *c, enum vtype t)
{
	bool in_obj = c->in_obj;
	enum slot slot = c->slot;
	int ok = on_value(c, t, NULL, 0);

	c->depth++;
	if (ok && in_obj && !(t == V_MAP && (slot == SLOT_META || slot == SLOT_ANNOTATIONS)))
		return JSON_SCAN_SKIP;
	return ok;
}

static int on_map_key(struct core *c, const char *key, size_t len)
{
	if (c->in_obj)
		c->slot = pick_key_slot(c, key, len);
	else if (c->is_watch)
		c->slot = watch_key_slot(c, key, len);
	else
		c->slot = list_key_slot((struct list_decoder *)c, key, len);
	return 1;
}

static int end_object(struct core *c)
{
	c->in_obj = false;
	if (!span_end(c))
		return 0;
	return c->is_watch ? 1 : emit_item((struct list_decoder *)c);
}

static int on_end(struct core *c)
{
	c->depth--;
	c->slot = SLOT_NONE;
	if (c->in_obj) {
		if (c->depth + 1 == c->obj_depth)
			return end_object(c);
		pick_end(c);
	} else if (c->is_watch) {
		if (c->depth == 0)
			return end_event((struct watch_decoder *)c);
	} else if (c->depth == 1) {
		struct list_decoder *d = (struct list_decoder *)c;
		if (d->in_items)
			envelope_resume(d);
		d->in_list_meta = false;
		d->in_items = false;
	}
	return 1;
}

static int on_token(void *ctx, enum json_token t, const char *s, size_t len)
{
	struct core *c = ctx;

	switch (t) {
	case JSON_NULL:
		return on_value(c, V_NULL, NULL, 0);
	case JSON_TRUE:
	case JSON_FALSE:
		return on_value(c, V_BOOL, NULL, 0);
	case JSON_NUMBER:
		return on_value(c, V_NUMBER, s, len);
	case JSON_STRING:
		return on_value(c, V_STRING, s, len);
	case JSON_KEY:
		return on_map_key(c, s, len);
	case JSON_MAP_START:
		return open_container(c, V_MAP);
	case JSON_ARRAY_START:
		return open_container(c, V_ARRAY);
	default: /* JSON_MAP_END, JSON_ARRAY_END */
		return on_end(c);
	}
}

/* ---- the core's life ---- */

static int core_init(struct core *c, bool is_watch)
{
	static const struct json_scan_limits limits = {
	    .depth_max = STREAM_DEPTH_MAX,
	    .gap_max = STREAM_OBJECT_MAX,
	    .number_max = NUMBER_MAX,
	};

	c->is_watch = is_watch;
	c->obj_depth = is_watch ? 2 : 3;
	c->js = json_scan_new(&limits, is_watch, on_token, c);
	return c->js ? 0 : -1;
}

static void core_free(struct core *c)
{
	json_scan_free(c->js);
	buf_free(&c->span.held);
	pick_free(&c->pick);
	buf_free(&c->err);
}

static int core_feed(struct core *c, const char *data, size_t len)
{
	if (c->failed)
		return -1;
	if (len == 0)
		return 0;
	c->chunk = data;
	c->chunk_len = len;
	if (json_scan_feed(c->js, data, len) < 0)
		return parse_failed(c);
	if (!c->is_watch) {
		struct list_decoder *d = (struct list_decoder *)c;
		if (!d->in_items && !envelope_upto(d, len))
			return -1;
		d->envelope_from = 0;
	}
	if (!span_save(c))
		return -1;
	c->chunk = NULL;
	c->chunk_len = 0;
	c->fed += len;
	return 0;
}

/* End of input: the scanner's verdict, after the decoder's own. */
static int core_finish(struct core *c, const char *cut)
{
	if (c->failed)
		return -1;
	c->at_end = true;
	if (c->depth != 0)
		return fail(c, cut) - 1;
	return json_scan_finish(c->js) < 0 ? parse_failed(c) : 0;
}

/* ---- list API ---- */

struct list_decoder *list_decoder_new(list_item_fn on_item, void *ctx)
{
	struct list_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	if (core_init(&d->c, false) < 0) {
		free(d);
		return NULL;
	}
	d->on_item = on_item;
	d->ctx = ctx;
	d->meta.remaining_item_count = -1;
	return d;
}

void list_decoder_on_envelope(struct list_decoder *d, list_envelope_fn fn)
{
	d->on_envelope = fn;
}

void list_decoder_tolerate_odd(struct list_decoder *d)
{
	d->c.tolerate_odd = true;
}

int list_decoder_feed(struct list_decoder *d, const char *data, size_t len)
{
	return core_feed(&d->c, data, len);
}

int list_decoder_finish(struct list_decoder *d, struct list_meta *meta)
{
	if (core_finish(&d->c, "list body cut short") < 0)
		return -1;
	if (meta)
		*meta = d->meta;
	return 0;
}

const struct list_meta *list_decoder_meta(const struct list_decoder *d)
{
	return &d->meta;
}

const char *list_decoder_error(const struct list_decoder *d)
{
	return core_error(&d->c);
}

void list_decoder_free(struct list_decoder *d)
{
	if (!d)
		return;
	core_free(&d->c);
	free(d->meta.continue_token);
	free(d);
}

size_t list_decoder_held_cap(const struct list_decoder *d)
{
	return d->c.span.held.cap;
}

/* ---- watch API ---- */

struct watch_decoder *watch_decoder_new(watch_event_fn on_event, void *ctx)
{
	struct watch_decoder *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	if (core_init(&w->c, true) < 0) {
		free(w);
		return NULL;
	}
	w->on_event = on_event;
	w->ctx = ctx;
	w->type = -1;
	return w;
}

void watch_decoder_tolerate_odd(struct watch_decoder *w)
{
	w->c.tolerate_odd = true;
}

int watch_decoder_feed(struct watch_decoder *w, const char *data, size_t len)
{
	return core_feed(&w->c, data, len);
}

int watch_decoder_finish(struct watch_decoder *w)
{
	return core_finish(&w->c, "watch stream cut inside an event");
}

const char *watch_decoder_error(const struct watch_decoder *w)
{
	return core_error(&w->c);
}

void watch_decoder_free(struct watch_decoder *w)
{
	if (!w)
		return;
	core_free(&w->c);
	free(w);
}

size_t watch_decoder_held_cap(const struct watch_decoder *w)
{
	return w->c.span.held.cap;
}

/* ---- gzip ---- */

#define GUNZIP_CHUNK (64 * 1024)

struct gunzip {
	z_stream z;
	size_t max_out, total;
	inflate_out_fn out;
	void *ctx;
	char *obuf;
	bool failed;
	bool in_member;	 /* inside a gzip member */
	bool any_member; /* a member was completed */
};

struct gunzip *gunzip_new(size_t max_out, inflate_out_fn out, void *ctx)
{
	struct gunzip *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->obuf = malloc(GUNZIP_CHUNK);
	if (!g->obuf || inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
		free(g->obuf);
		free(g);
		return NULL;
	}
	g->max_out = max_out;
	g->out = out;
	g->ctx = ctx;
	return g;
}

static int gunzip_emit(struct gunzip *g, size_t n)
{
	if (n > g->max_out - g->total)
		return -1; /* a gzip bomb, or just too big */
	g->total += n;
	if (n && g->out && g->out(g->ctx, g->obuf, n) != 0)
		return -1;
	return 0;
}

/* One inflate call, of at most cap bytes of output (cap > 0): 1 to call
 * again (input left, or zlib may hold more output: a match it could not
 * finish copying), 0 when it needs more input, -1. */
static int gunzip_step(struct gunzip *g, size_t cap)
{
	int ret;
	uInt room = cap < GUNZIP_CHUNK ? (uInt)cap : GUNZIP_CHUNK;

	if (!g->in_member) {
		if (!g->z.avail_in)
			return 0; /* nothing of a next member yet */
		if (g->any_member && inflateReset(&g->z) != Z_OK)
			return -1;
		g->in_member = true;
	}
	g->z.next_out = (Bytef *)g->obuf;
	g->z.avail_out = room;
	ret = inflate(&g->z, Z_NO_FLUSH);
	if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
		return -1;
	if (ret == Z_BUF_ERROR && g->z.avail_in > 0)
		return -1; /* no progress with input and room: never for sound data */
	if (gunzip_emit(g, room - g->z.avail_out) < 0)
		return -1;
	if (ret == Z_STREAM_END) {
		g->in_member = false;
		g->any_member = true;
		return g->z.avail_in > 0;
	}
	return g->z.avail_in > 0 || g->z.avail_out == 0;
}

int gunzip_feed_upto(struct gunzip *g, const char *data, size_t len, size_t max_out, size_t *used)
{
	uInt piece = len > (1u << 30) ? (1u << 30) : (uInt)len;
	size_t out0 = g->total;
	int r = 1;

	*used = 0;
	if (g->failed)
		return -1;
	g->z.next_in = (const Bytef *)data;
	g->z.avail_in = piece;
	while (r > 0 && g->total - out0 < max_out)
		r = gunzip_step(g, max_out - (g->total - out0));
	*used = piece - g->z.avail_in;
	g->z.next_in = NULL; /* data is the caller's, valid only during the call */
	g->z.avail_in = 0;
	g->failed = r < 0;
	if (g->failed)
		return -1;
	return r > 0 || *used < len;
}

int gunzip_feed(struct gunzip *g, const char *data, size_t len)
{
	size_t used;
	int r;

	do {
		r = gunzip_feed_upto(g, data, len, SIZE_MAX, &used);
		data += used;
		len -= used;
	} while (r > 0);
	return r;
}

int gunzip_finish(struct gunzip *g)
{
	return g->failed || g->in_member || !g->any_member ? -1 : 0;
}

void gunzip_free(struct gunzip *g)
{
	if (!g)
		return;
	inflateEnd(&g->z);
	free(g->obuf);
	free(g);
}
