/*
 * follow.c - a watch's filtered view kept in step with the filters'
 * inputs, see follow.h.
 *
 * What the client was shown of an object is one number: SHOWN_DROPPED, or a
 * 64-bit digest of the filtered bytes it got.  An object passed as the
 * source has it has no entry, so that the map holds only what the filters
 * act on.  Comparing digests rather than bytes keeps the entries small; two
 * filtered forms of one object with the same digest would hide one change,
 * a chance of 2^-64.
 */
#include "filter/follow.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/patch.h"
#include "util/buf.h"
#include "util/strmap.h"

#define SHOWN_RAW     0u /* no entry: the object as the source has it */
#define SHOWN_DROPPED 1u /* the client does not hold it */

struct follow {
	struct rewrite *rw; /* only its one-object filtering is used */
	follow_emit_fn emit;
	void *ctx;
	struct strmap shown; /* "ns/name" -> num: SHOWN_DROPPED or a digest */
	struct strmap seen;  /* a refilter in steps: the held keys it met */
	struct buf key;
	struct buf moved; /* an object at the refilter's resourceVersion */
};

static int discard(void *ctx, const char *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

struct follow *follow_new(filter_mask mask, const struct filter_target *t,
			  const struct filter_env_ref *env, follow_emit_fn emit, void *ctx)
{
	struct follow *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->rw = rewrite_new(REWRITE_OBJECT, false, mask, t, env, discard, NULL);
	if (!f->rw) {
		free(f);
		return NULL;
	}
	f->emit = emit;
	f->ctx = ctx;
	f->shown = (struct strmap)STRMAP_INIT;
	f->seen = (struct strmap)STRMAP_INIT;
	return f;
}

void follow_free(struct follow *f)
{
	if (!f)
		return;
	rewrite_free(f->rw);
	strmap_free(&f->shown);
	strmap_free(&f->seen);
	buf_free(&f->key);
	buf_free(&f->moved);
	free(f);
}

size_t follow_held(const struct follow *f)
{
	return f->shown.len;
}

void follow_counts(const struct follow *f, unsigned long *changed, unsigned long *dropped)
{
	rewrite_counts(f->rw, changed, dropped);
}

/* FNV-1a, kept clear of the two reserved values. */
static uint64_t digest(const char *data, size_t len)
{
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)data[i];
		h *= 1099511628211ull;
	}
	return h <= SHOWN_DROPPED ? h + 2 : h;
}

static const char *key_of(struct follow *f, const struct stream_object *o)
{
	buf_reset(&f->key);
	if (buf_printf(&f->key, "%s/%s", o->namespace ? o->namespace : "", o->name ? o->name : ""))
		return NULL;
	return buf_cstr(&f->key);
}

static uint64_t shown_of(const struct follow *f, const char *key)
{
	struct strmap_entry *e = strmap_get(&f->shown, key);
	return e ? e->num : SHOWN_RAW;
}

/* Record what the client now holds of key: 0, or -1 out of memory. */
static int record(struct follow *f, const char *key, uint64_t shown)
{
	if (shown == SHOWN_RAW) {
		strmap_del(&f->shown, key);
		return 0;
	}
	struct strmap_entry *e = strmap_put(&f->shown, key, NULL);
	if (!e)
		return -1;
	e->num = shown;
	return 0;
}

/* What one filtering shows: the state, and in *data, *len the bytes. */
static uint64_t filter_one(struct follow *f, const struct stream_object *o, const char **data,
			   size_t *len)
{
	switch (rewrite_one(f->rw, o, data, len)) {
	case FILTER_DROP:
		*data = o->data;
		*len = o->len;
		return SHOWN_DROPPED;
	case FILTER_CHANGED:
		return digest(*data, *len);
	default:
		return SHOWN_RAW;
	}
}

int follow_event(struct follow *f, enum watch_type type, const struct stream_object *o)
{
	const char *key = key_of(f, o), *data;
	size_t len;
	if (!key)
		return -1;
	bool was_dropped = shown_of(f, key) == SHOWN_DROPPED;
	uint64_t now = filter_one(f, o, &data, &len);
	if (type == WATCH_DELETED)
		strmap_del(&f->shown, key);
	else if (record(f, key, now) < 0)
		return -1;
	/* gone for this node: as if deleted, as it was (a client that does
	 * not hold it ignores that, as the proxied watches have it) */
	if (type == WATCH_DELETED || now == SHOWN_DROPPED)
		type = WATCH_DELETED;
	else if (was_dropped) /* the client let it go: it comes anew */
		type = WATCH_ADDED;
	return f->emit(f->ctx, type, data, len) ? -1 : 0;
}

/* data with metadata.resourceVersion rv, in f->moved: what a client
 * records as the last resourceVersion it saw, so that it resumes from the
 * refilter's and not from before it. */
static int at_rv(struct follow *f, const char *data, size_t len, uint64_t rv)
{
	char patch[64]; /* fixed text around one uint64: at most 59 bytes */
	char *err = NULL;
	snprintf(patch, sizeof patch, "{\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"}}", rv);
	buf_reset(&f->moved);
	int rc = patch_apply(PATCH_MERGE, data, len, patch, strlen(patch), &f->moved, &err);
	free(err);
	return rc;
}

int follow_refilter_begin(struct follow *f)
{
	strmap_free(&f->seen);
	f->seen = (struct strmap)STRMAP_INIT;
	return 0;
}

int follow_refilter_object(struct follow *f, const struct stream_object *o, uint64_t rv,
			   bool unknown)
{
	const char *key = key_of(f, o), *data;
	size_t len;
	if (!key)
		return -1;
	uint64_t was = shown_of(f, key);
	uint64_t now = filter_one(f, o, &data, &len);
	if (now != was || unknown) {
		enum watch_type type = now == SHOWN_DROPPED		  ? WATCH_DELETED
				       : was == SHOWN_DROPPED && !unknown ? WATCH_ADDED
									  : WATCH_MODIFIED;
		if (at_rv(f, data, len, rv) < 0 || record(f, key, now) < 0 ||
		    f->emit(f->ctx, type, f->moved.data, f->moved.len))
			return -1;
	}
	/* the key again: filter_one and at_rv leave f->key alone, record too */
	if (now != SHOWN_RAW && !strmap_put(&f->seen, key, NULL))
		return -1;
	return 0;
}

/* Forget what is held of the objects the refilter did not meet: deleted or
 * unselected without an event through follow_event (which should not
 * happen). */
int follow_refilter_end(struct follow *f)
{
	struct strmap stale = STRMAP_INIT;
	struct strmap_entry *e;
	int rc = 0;
	if (f->seen.len < f->shown.len)
		for (size_t it = 0; !rc && (e = strmap_next(&f->shown, &it));)
			if (!strmap_get(&f->seen, e->key) && !strmap_put(&stale, e->key, NULL))
				rc = -1;
	for (size_t it = 0; !rc && (e = strmap_next(&stale, &it));)
		strmap_del(&f->shown, e->key);
	strmap_free(&stale);
	strmap_free(&f->seen);
	f->seen = (struct strmap)STRMAP_INIT;
	return rc;
}

int follow_refilter(struct follow *f, const struct stream_object *objs, size_t n, uint64_t rv,
		    bool unknown)
{
	int rc = follow_refilter_begin(f);
	for (size_t i = 0; i < n && !rc; i++)
		rc = follow_refilter_object(f, &objs[i], rv, unknown);
	return rc ? rc : follow_refilter_end(f);
}
