/*
 * sharedcache.c - one resource's objects in memory, written by the upstream
 * and read by every local list: see sharedcache.h for the semantics and the
 * locks.  Watchers are in watcher.c.
 *
 * A write builds what it can before taking the readers' lock (keys, the
 * relist's new map and its events, patched copies) and makes room in the
 * window first, so that once under the lock nothing can fail half way.
 */
#include "mux/sharedcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mux/sharedcache_internal.h"
#include "util/clock.h"

#define DEFAULT_MAX_EVENTS 10000
#define DEFAULT_MAX_AGE_MS (3 * 60 * 1000) /* YurtHub's watch cache history */

const char *mux_status_name(enum mux_status s)
{
	static const char *const names[] = {
	    [MUX_OK] = "ok",	       [MUX_TIMEOUT] = "timeout", [MUX_CLOSED] = "closed",
	    [MUX_EXPIRED] = "expired", [MUX_TOO_NEW] = "too new", [MUX_NOT_READY] = "not ready",
	    [MUX_STALE] = "stale",     [MUX_INVALID] = "invalid", [MUX_NOMEM] = "out of memory",
	};

	if ((size_t)s < sizeof(names) / sizeof(names[0]) && names[s])
		return names[s];
	return "?";
}

void mux_cache_wait_until(struct mux_cache *c, int64_t deadline_ms)
{
	struct timespec ts = {.tv_sec = deadline_ms / 1000,
			      .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};

	pthread_cond_timedwait(&c->changed, &c->lock, &ts);
}

/* The cache's clock, for the ages of events. */
static int64_t event_clock(const struct mux_cache *c)
{
	return c->cfg.clock_ms ? c->cfg.clock_ms(c->cfg.clock_ctx) : clock_now_ms();
}

/* ---- life ---- */

static void fill_defaults(struct mux_cache_config *cfg)
{
	if (!cfg->max_events)
		cfg->max_events = DEFAULT_MAX_EVENTS;
	if (!cfg->max_age_ms)
		cfg->max_age_ms = DEFAULT_MAX_AGE_MS;
}

static int init_sync(struct mux_cache *c)
{
	pthread_condattr_t attr;
	int rc;

	if (pthread_condattr_init(&attr))
		return -1;
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
	     pthread_cond_init(&c->changed, &attr);
	pthread_condattr_destroy(&attr);
	if (rc)
		return -1;
	pthread_mutex_init(&c->write_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	return 0;
}

struct mux_cache *mux_cache_new(const struct mux_cache_config *config)
{
	struct mux_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (config)
		c->cfg = *config;
	fill_defaults(&c->cfg);
	if (init_sync(c) < 0) {
		free(c);
		return NULL;
	}
	c->objs = (struct strmap)STRMAP_INIT;
	window_init(&c->window, 0, 0);
	return c;
}

/* Drop a map's references and the map. */
static void objs_free(struct strmap *m)
{
	struct strmap_entry *e;

	for (size_t i = 0; (e = strmap_next(m, &i));)
		mux_obj_unref(e->value);
	strmap_free(m);
}

void mux_cache_free(struct mux_cache *c)
{
	if (!c)
		return;
	/* a watcher left behind would point at freed memory: a caller's bug
	 * that ASan then names */
	objs_free(&c->objs);
	window_free(&c->window);
	pthread_cond_destroy(&c->changed);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->write_lock);
	free(c);
}

void mux_cache_close(struct mux_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->closed = true;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
}

/* ---- the writer: one event ---- */

/* Drop what is too old, and make a slot for n more events.  c->lock held. */
static int make_room(struct mux_cache *c, size_t n)
{
	if (c->cfg.max_age_ms > 0)
		window_evict_before(&c->window, event_clock(c) - c->cfg.max_age_ms);
	return window_reserve(&c->window, n, c->cfg.max_events);
}

/* The map's side of an event: the map's reference to the old state (NULL
 * when none) moves into *prev, the map takes a reference to the new one.
 * c->lock held. */
static enum mux_status update_map(struct mux_cache *c, const char *key, enum mux_event_type type,
				  struct mux_obj *o, struct mux_obj **prev)
{
	struct strmap_entry *e = strmap_get(&c->objs, key);

	*prev = e ? e->value : NULL;
	if (type == MUX_DELETED) {
		if (e) {
			c->object_bytes -= (*prev)->len;
			strmap_del(&c->objs, key);
		}
		return MUX_OK;
	}
	if (e) {
		c->object_bytes -= (*prev)->len;
		e->value = mux_obj_ref(o);
	} else if (strmap_put(&c->objs, key, o)) {
		mux_obj_ref(o);
	} else {
		return MUX_NOMEM;
	}
	c->object_bytes += o->len;
	return MUX_OK;
}

/* ADDED of a known object is a change to it, MODIFIED of an unknown one
 * its arrival: what the event did to the cache, which is what watchers'
 * filters are applied to. */
static enum mux_event_type effective_type(enum mux_event_type type, const struct mux_obj *prev)
{
	if (type == MUX_DELETED)
		return MUX_DELETED;
	return prev ? MUX_MODIFIED : MUX_ADDED;
}

/* Record one event; c->write_lock held, o's reference moves in. */
static enum mux_status record(struct mux_cache *c, enum mux_event_type type, struct mux_obj *o,
			      const char *key)
{
	struct mux_obj *prev;
	enum mux_status st = MUX_OK;

	pthread_mutex_lock(&c->lock);
	if (type == MUX_DELETED && !strmap_get(&c->objs, key)) {
		c->rv = o->rv; /* nothing to tell anyone, but time passed */
		mux_obj_unref(o);
	} else if (make_room(c, 1) < 0) {
		st = MUX_NOMEM;
	} else if ((st = update_map(c, key, type, o, &prev)) == MUX_OK) {
		struct mux_event ev = {.type = effective_type(type, prev),
				       .rv = o->rv,
				       .at_ms = event_clock(c),
				       .obj = o,
				       .prev = prev};
		window_push(&c->window, &ev);
		c->rv = o->rv;
	}
	if (st == MUX_OK)
		pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	return st;
}

enum mux_status mux_cache_apply(struct mux_cache *c, enum mux_event_type type, struct mux_obj *o)
{
	enum mux_status st;
	char *key;

	if (!o)
		return MUX_INVALID;
	if (type != MUX_ADDED && type != MUX_MODIFIED && type != MUX_DELETED) {
		mux_obj_unref(o);
		return MUX_INVALID;
	}
	key = mux_obj_key(o);
	if (!key) {
		mux_obj_unref(o);
		return MUX_NOMEM;
	}
	pthread_mutex_lock(&c->write_lock);
	/* ready and rv change only under write_lock, which is held */
	if (!c->ready)
		st = MUX_NOT_READY;
	else if (o->rv <= c->rv)
		st = MUX_STALE;
	else
		st = record(c, type, o, key);
	pthread_mutex_unlock(&c->write_lock);
	if (st != MUX_OK) /* record() took it only on success */
		mux_obj_unref(o);
	free(key);
	return st;
}

enum mux_status mux_cache_bookmark(struct mux_cache *c, uint64_t rv)
{
	enum mux_status st = MUX_OK;

	pthread_mutex_lock(&c->write_lock);
	pthread_mutex_lock(&c->lock);
	if (!c->ready) {
		st = MUX_NOT_READY;
	} else if (rv > c->rv) {
		c->rv = rv;
		pthread_cond_broadcast(&c->changed);
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->write_lock);
	return st;
}

/* ---- the writer: a relist ---- */

/* The listed objects as a map; every reference in objs moves into it (or
 * is dropped, for a key listed twice).  -1 when out of memory, with every
 * reference dropped. */
static int build_map(struct mux_obj **objs, size_t n, struct strmap *out)
{
	*out = (struct strmap)STRMAP_INIT;
	for (size_t i = 0; i < n; i++) {
		char *key = mux_obj_key(objs[i]);
		struct strmap_entry *e = key ? strmap_get(out, key) : NULL;

		if (e) {
			mux_obj_unref(e->value);
			e->value = objs[i];
		} else if (!key || !strmap_put(out, key, objs[i])) {
			free(key);
			for (size_t j = i; j < n; j++)
				mux_obj_unref(objs[j]);
			objs_free(out);
			return -1;
		}
		free(key);
	}
	return 0;
}

/* A relist's events, built before anything changes. */
struct diff {
	struct mux_event *events;
	size_t n, cap;
};

static void diff_free(struct diff *d)
{
	for (size_t i = 0; i < d->n; i++) {
		mux_obj_unref(d->events[i].obj);
		mux_obj_unref(d->events[i].prev);
	}
	free(d->events);
}

/* Append an event holding its own references to obj and prev. */
static int diff_add(struct diff *d, enum mux_event_type type, uint64_t rv, struct mux_obj *obj,
		    struct mux_obj *prev)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct mux_event *events = realloc(d->events, cap * sizeof(*events));

		if (!events)
			return -1;
		d->events = events;
		d->cap = cap;
	}
	d->events[d->n++] = (struct mux_event){.type = type,
					       .rv = rv,
					       .obj = mux_obj_ref(obj),
					       .prev = prev ? mux_obj_ref(prev) : NULL};
	return 0;
}

/* Where a changed object's event goes in the history: at its own
 * resourceVersion, which is above the cache's unless the upstream went
 * back in time; such an object is put at the list's, the only place the
 * watchers will still look. */
static uint64_t change_rv(const struct mux_cache *c, const struct mux_obj *o, uint64_t list_rv)
{
	return o->rv > c->rv ? o->rv : list_rv;
}

/* The listed objects that are new or changed.  An object the cache holds
 * at the same resourceVersion is the same object: the new map takes the
 * cache's copy, so that snapshots and events keep sharing it. */
static int diff_changes(const struct mux_cache *c, struct strmap *next, uint64_t rv, struct diff *d)
{
	struct strmap_entry *e;

	for (size_t i = 0; (e = strmap_next(next, &i));) {
		struct strmap_entry *old = strmap_get(&c->objs, e->key);
		struct mux_obj *o = e->value, *had = old ? old->value : NULL;

		if (had && had->rv == o->rv) {
			e->value = mux_obj_ref(had);
			mux_obj_unref(o);
		} else if (diff_add(d, had ? MUX_MODIFIED : MUX_ADDED, change_rv(c, o, rv), o,
				    had) < 0) {
			return -1;
		}
	}
	return 0;
}

/* The cache's objects the list lacks: deleted at some point the list does
 * not tell, so at the list's resourceVersion, which their bytes must then
 * carry (a client takes its resourceVersion from the last object it got). */
static int diff_deletions(const struct mux_cache *c, const struct strmap *next, uint64_t rv,
			  struct diff *d)
{
	struct strmap_entry *e;

	for (size_t i = 0; (e = strmap_next(&c->objs, &i));) {
		struct mux_obj *gone;
		int rc;

		if (strmap_get(next, e->key))
			continue;
		gone = mux_obj_with_rv(e->value, rv);
		if (!gone)
			return -1;
		rc = diff_add(d, MUX_DELETED, rv, gone, e->value);
		mux_obj_unref(gone);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int compare_keys(const struct mux_obj *a, const struct mux_obj *b)
{
	int ns = strcmp(a->namespace, b->namespace);

	return ns ? ns : strcmp(a->name, b->name);
}

/* History order: by resourceVersion; at one resourceVersion changes before
 * deletions, then by key, so that a relist's events come out the same way
 * every time. */
static int compare_events(const void *pa, const void *pb)
{
	const struct mux_event *a = pa, *b = pb;

	if (a->rv != b->rv)
		return a->rv < b->rv ? -1 : 1;
	if ((a->type == MUX_DELETED) != (b->type == MUX_DELETED))
		return a->type == MUX_DELETED ? 1 : -1;
	return compare_keys(a->obj, b->obj);
}

static size_t map_bytes(const struct strmap *m)
{
	struct strmap_entry *e;
	size_t bytes = 0;

	for (size_t i = 0; (e = strmap_next(m, &i));)
		bytes += ((const struct mux_obj *)e->value)->len;
	return bytes;
}

/* Swap the new map in and drop the old one's references after the lock is
 * let go: freeing thousands of objects is no reason to hold readers. */
static void swap_map(struct mux_cache *c, struct strmap *next, struct strmap *old)
{
	*old = c->objs;
	c->objs = *next;
	c->object_bytes = map_bytes(&c->objs);
	*next = (struct strmap)STRMAP_INIT;
}

/* A list older than the cache, or the first: the history starts again at
 * rv, and every watcher learns it must relist. */
static void reset(struct mux_cache *c, struct strmap *next, uint64_t rv)
{
	struct strmap old;
	uint64_t end;

	pthread_mutex_lock(&c->lock);
	swap_map(c, next, &old);
	end = window_end_seq(&c->window);
	window_free(&c->window);
	window_init(&c->window, rv, end);
	if (c->ready)
		c->epoch++;
	c->rv = rv;
	c->ready = true;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	objs_free(&old);
}

/* The differences as events, then the swap.  d's references move into the
 * window. */
static enum mux_status apply_diff(struct mux_cache *c, struct strmap *next, struct diff *d,
				  uint64_t rv)
{
	struct strmap old;
	int64_t now;

	if (d->n > 1)
		qsort(d->events, d->n, sizeof(*d->events), compare_events);
	pthread_mutex_lock(&c->lock);
	if (make_room(c, d->n) < 0) {
		pthread_mutex_unlock(&c->lock);
		return MUX_NOMEM;
	}
	swap_map(c, next, &old);
	now = event_clock(c);
	for (size_t i = 0; i < d->n; i++) {
		d->events[i].at_ms = now;
		window_push(&c->window, &d->events[i]);
	}
	if (d->n && d->events[d->n - 1].rv > rv)
		rv = d->events[d->n - 1].rv; /* an object newer than its list */
	c->rv = rv;
	d->n = 0;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	objs_free(&old);
	return MUX_OK;
}

/* Whether the list has an object older than the copy the cache holds: that
 * copy was never the upstream's (the hub's own offline edit, at a local
 * resourceVersion), and an event could only take the object's rv back. */
static bool goes_back(const struct mux_cache *c, const struct strmap *next)
{
	struct strmap_entry *e;

	for (size_t i = 0; (e = strmap_next(next, &i));) {
		struct strmap_entry *old = strmap_get(&c->objs, e->key);

		if (old && ((const struct mux_obj *)old->value)->rv >
			       ((const struct mux_obj *)e->value)->rv)
			return true;
	}
	return false;
}

/* write_lock held: the cache's map and rv may be read without lock. */
static enum mux_status relist(struct mux_cache *c, struct strmap *next, uint64_t rv)
{
	struct diff d = {0};
	enum mux_status st;

	if (!c->ready || rv < c->rv || goes_back(c, next)) {
		reset(c, next, rv);
		return MUX_OK;
	}
	if (diff_changes(c, next, rv, &d) < 0 || diff_deletions(c, next, rv, &d) < 0)
		st = MUX_NOMEM;
	else
		st = apply_diff(c, next, &d, rv);
	diff_free(&d);
	return st;
}

enum mux_status mux_cache_replace(struct mux_cache *c, struct mux_obj **objs, size_t n, uint64_t rv)
{
	struct strmap next;
	enum mux_status st;

	if (build_map(objs, n, &next) < 0)
		return MUX_NOMEM;
	if (!rv) {
		objs_free(&next);
		return MUX_INVALID;
	}
	pthread_mutex_lock(&c->write_lock);
	st = relist(c, &next, rv);
	pthread_mutex_unlock(&c->write_lock);
	objs_free(&next); /* what is left after a failure; empty after a swap */
	return st;
}

/* ---- readers ---- */

enum mux_status mux_cache_wait_rv(struct mux_cache *c, uint64_t rv, int64_t timeout_ms)
{
	int64_t deadline = clock_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	enum mux_status st;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (c->closed) {
			st = MUX_CLOSED;
			break;
		}
		if (c->ready && c->rv >= rv) {
			st = MUX_OK;
			break;
		}
		if (clock_now_ms() >= deadline) {
			st = MUX_TIMEOUT;
			break;
		}
		mux_cache_wait_until(c, deadline);
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

uint64_t mux_cache_outside_version(struct mux_cache *c, uint64_t v)
{
	uint64_t rv;

	pthread_mutex_lock(&c->lock);
	if (v != c->outside_version) {
		/* the first version only starts the record: no answer was made
		 * with another */
		c->outside_rv = c->outside_version ? c->rv : 0;
		c->outside_version = v;
	}
	rv = c->outside_rv;
	pthread_mutex_unlock(&c->lock);
	return rv;
}

uint64_t mux_cache_rv(struct mux_cache *c)
{
	uint64_t rv;

	pthread_mutex_lock(&c->lock);
	rv = c->rv;
	pthread_mutex_unlock(&c->lock);
	return rv;
}

void mux_cache_stats(struct mux_cache *c, struct mux_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = (struct mux_cache_stats){.objects = c->objs.len,
					.object_bytes = c->object_bytes,
					.events = c->window.count,
					.watchers = c->watchers,
					.rv = c->rv,
					.window_start_rv = c->window.start_rv};
	pthread_mutex_unlock(&c->lock);
}

static int compare_objs(const void *pa, const void *pb)
{
	return compare_keys(*(const struct mux_obj *const *)pa, *(const struct mux_obj *const *)pb);
}

/* References to the objects of the namespace f names (all when none):
 * the cheap test under the lock, the selectors after. */
enum mux_status mux_cache_take_snapshot(struct mux_cache *c, const struct mux_filter *f,
					struct mux_list *out)
{
	const char *ns = f && f->namespace && *f->namespace ? f->namespace : NULL;
	struct strmap_entry *e;

	if (c->closed)
		return MUX_CLOSED;
	if (!c->ready)
		return MUX_NOT_READY;
	out->rv = c->rv;
	if (!c->objs.len)
		return MUX_OK;
	out->objs = malloc(c->objs.len * sizeof(*out->objs));
	if (!out->objs)
		return MUX_NOMEM;
	for (size_t i = 0; (e = strmap_next(&c->objs, &i));) {
		struct mux_obj *o = e->value;

		if (!ns || strcmp(ns, o->namespace) == 0)
			out->objs[out->n++] = mux_obj_ref(o);
	}
	return MUX_OK;
}

/* Keep what f's selectors let through. */
void mux_list_select(const struct mux_filter *f, struct mux_list *l)
{
	size_t kept = 0;

	if (mux_filter_is_all(f))
		return;
	for (size_t i = 0; i < l->n; i++) {
		if (mux_filter_match(f, l->objs[i]))
			l->objs[kept++] = l->objs[i];
		else
			mux_obj_unref(l->objs[i]);
	}
	l->n = kept;
}

enum mux_status mux_cache_list(struct mux_cache *c, const struct mux_filter *f,
			       struct mux_list *out)
{
	enum mux_status st;

	*out = (struct mux_list){0};
	pthread_mutex_lock(&c->lock);
	st = mux_cache_take_snapshot(c, f, out);
	pthread_mutex_unlock(&c->lock);
	if (st != MUX_OK) {
		mux_list_free(out);
		return st;
	}
	mux_list_select(f, out);
	/* etcd's order, which kube-apiserver's lists have */
	if (out->n > 1)
		qsort(out->objs, out->n, sizeof(*out->objs), compare_objs);
	return MUX_OK;
}

void mux_list_free(struct mux_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		mux_obj_unref(l->objs[i]);
	free(l->objs);
	*l = (struct mux_list){0};
}
