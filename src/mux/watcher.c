/*
 * watcher.c - one client's watch on a shared cache, see sharedcache.h.
 *
 * A watcher is a place in the cache's window (a sequence number), not a
 * queue: however far behind it is, it holds nothing but that number, so N
 * watchers cost N small structs, not N copies of the history.  Its reader
 * thread takes the next event under the cache's lock (a copy of the event
 * with references to its objects), lets the lock go, and only then applies
 * the watcher's filter, which parses JSON.
 */
#include "mux/sharedcache.h"

#include <stdlib.h>
#include <string.h>

#include "mux/sharedcache_internal.h"
#include "util/clock.h"

struct mux_watcher {
	struct mux_cache *cache;
	struct mux_filter filter; /* borrowed */
	uint64_t epoch;		  /* the history it started in */
	uint64_t next_seq;	  /* the next event of the window to look at */
	uint64_t progress;	  /* every event up to here is given or skipped */
	/* a watch from rv 0: the objects at the start, given as ADDED first */
	struct mux_obj **initial;
	size_t ninitial, initial_next;
	int64_t bookmark_interval_ms;
	uint64_t last_sent_rv; /* of the last delivery or bookmark */
	int64_t last_sent_ms;
	bool stopped; /* under the cache's lock: written by any thread */
};

/* ---- start ---- */

/* References to every object of the watcher's namespace.  c->lock held. */
static enum mux_status take_initial(struct mux_watcher *w)
{
	struct mux_cache *c = w->cache;
	const char *ns = w->filter.namespace && *w->filter.namespace ? w->filter.namespace : NULL;
	struct strmap_entry *e;

	if (!c->objs.len)
		return MUX_OK;
	w->initial = malloc(c->objs.len * sizeof(*w->initial));
	if (!w->initial)
		return MUX_NOMEM;
	for (size_t i = 0; (e = strmap_next(&c->objs, &i));) {
		struct mux_obj *o = e->value;

		if (!ns || strcmp(ns, o->namespace) == 0)
			w->initial[w->ninitial++] = mux_obj_ref(o);
	}
	return MUX_OK;
}

/* Place w in the history.  c->lock held. */
static enum mux_status place(struct mux_watcher *w, uint64_t from_rv)
{
	struct mux_cache *c = w->cache;

	if (c->closed)
		return MUX_CLOSED;
	if (!c->ready)
		return MUX_NOT_READY;
	if (from_rv > c->rv)
		return MUX_TOO_NEW;
	w->epoch = c->epoch;
	if (from_rv == 0) {
		w->next_seq = window_end_seq(&c->window);
		w->progress = c->rv;
		return take_initial(w);
	}
	if (from_rv < c->window.start_rv)
		return MUX_EXPIRED;
	w->next_seq = window_seq_after(&c->window, from_rv);
	w->progress = from_rv;
	w->last_sent_rv = from_rv;
	return MUX_OK;
}

static void drop_initial(struct mux_watcher *w)
{
	for (size_t i = w->initial_next; i < w->ninitial; i++)
		mux_obj_unref(w->initial[i]);
	free(w->initial);
	w->initial = NULL;
	w->ninitial = w->initial_next = 0;
}

enum mux_status mux_watch(struct mux_cache *c, const struct mux_watch_options *opts,
			  struct mux_watcher **out)
{
	struct mux_watcher *w = calloc(1, sizeof(*w));
	enum mux_status st;

	*out = NULL;
	if (!w)
		return MUX_NOMEM;
	w->cache = c;
	if (opts->filter)
		w->filter = *opts->filter;
	w->bookmark_interval_ms = opts->bookmark_interval_ms;
	w->last_sent_ms = clock_now_ms();
	pthread_mutex_lock(&c->lock);
	st = place(w, opts->from_rv);
	if (st == MUX_OK)
		c->watchers++;
	pthread_mutex_unlock(&c->lock);
	if (st != MUX_OK) {
		drop_initial(w);
		free(w);
		return st;
	}
	*out = w;
	return MUX_OK;
}

/* ---- next ---- */

/* What the filter makes of an event: kube-apiserver's cacheWatcher rules.
 * The state before and after are both tested: an object entering the
 * watcher's view is ADDED, one leaving it DELETED, in its last state the
 * watcher could see, at the event's resourceVersion. */
static enum mux_status convert(const struct mux_watcher *w, const struct mux_event *ev,
			       struct mux_delivery *out, bool *deliver)
{
	bool now = ev->type != MUX_DELETED && mux_filter_match(&w->filter, ev->obj);
	bool before = ev->prev && mux_filter_match(&w->filter, ev->prev);

	*deliver = now || before;
	out->rv = ev->rv;
	if (now) {
		out->type = before ? MUX_MODIFIED : MUX_ADDED;
		out->obj = mux_obj_ref(ev->obj);
	} else if (before && ev->type == MUX_DELETED) {
		out->type = MUX_DELETED;
		out->obj = mux_obj_ref(ev->obj); /* already at ev->rv */
	} else if (before) {
		/* a copy per watcher, dropped once written: only this client
		 * needs it, and only the once */
		out->type = MUX_DELETED;
		out->obj = mux_obj_with_rv(ev->prev, ev->rv);
		if (!out->obj)
			return MUX_NOMEM;
	}
	return MUX_OK;
}

/* The next object of the initial state that passes the filter: true and
 * *out, or false when there is none left. */
static bool next_initial(struct mux_watcher *w, struct mux_delivery *out)
{
	while (w->initial_next < w->ninitial) {
		struct mux_obj *o = w->initial[w->initial_next++];

		if (mux_filter_match(&w->filter, o)) {
			*out = (struct mux_delivery){.type = MUX_ADDED, .rv = o->rv, .obj = o};
			return true;
		}
		mux_obj_unref(o);
	}
	drop_initial(w);
	return false;
}

static bool bookmark_due(const struct mux_watcher *w, int64_t now)
{
	return w->bookmark_interval_ms > 0 && now - w->last_sent_ms >= w->bookmark_interval_ms &&
	       w->progress > w->last_sent_rv;
}

/* When to wake up to look again: the deadline, or the next bookmark. */
static int64_t wake_at(const struct mux_watcher *w, int64_t deadline)
{
	int64_t bookmark_at = w->last_sent_ms + w->bookmark_interval_ms;

	if (w->bookmark_interval_ms > 0 && bookmark_at < deadline)
		return bookmark_at;
	return deadline;
}

enum take { TAKE_EVENT, TAKE_BOOKMARK, TAKE_STATUS };

/* Wait for the next event of the window (*ev, with references of its own),
 * a due bookmark, or a status for the caller (*st).  Takes c->lock. */
static enum take take(struct mux_watcher *w, int64_t deadline, struct mux_event *ev,
		      enum mux_status *st)
{
	struct mux_cache *c = w->cache;
	enum take what = TAKE_STATUS;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		const struct mux_event *e;
		int64_t now;

		if (w->stopped || c->closed) {
			*st = MUX_CLOSED;
			break;
		}
		if (w->epoch != c->epoch || w->next_seq < c->window.first_seq) {
			*st = MUX_EXPIRED; /* reset, or evicted before it was seen */
			break;
		}
		if ((e = window_get(&c->window, w->next_seq))) {
			*ev = *e;
			mux_obj_ref(ev->obj);
			if (ev->prev)
				mux_obj_ref(ev->prev);
			w->next_seq++;
			what = TAKE_EVENT;
			break;
		}
		if (c->rv > w->progress)
			w->progress = c->rv; /* seen all: current at the cache's rv */
		now = clock_now_ms();
		if (bookmark_due(w, now)) {
			what = TAKE_BOOKMARK;
			break;
		}
		if (now >= deadline) {
			*st = MUX_TIMEOUT;
			break;
		}
		mux_cache_wait_until(c, wake_at(w, deadline));
	}
	pthread_mutex_unlock(&c->lock);
	return what;
}

static void sent(struct mux_watcher *w, uint64_t rv)
{
	w->last_sent_rv = rv;
	w->last_sent_ms = clock_now_ms();
}

enum mux_status mux_watcher_next(struct mux_watcher *w, int64_t timeout_ms,
				 struct mux_delivery *out)
{
	int64_t deadline = clock_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	enum mux_status st = MUX_OK;

	*out = (struct mux_delivery){0};
	if (w->initial && next_initial(w, out)) {
		sent(w, out->rv);
		return MUX_OK;
	}
	for (;;) {
		struct mux_event ev;
		bool deliver = false;

		switch (take(w, deadline, &ev, &st)) {
		case TAKE_STATUS:
			return st;
		case TAKE_BOOKMARK:
			*out = (struct mux_delivery){.type = MUX_BOOKMARK, .rv = w->progress};
			sent(w, out->rv);
			return MUX_OK;
		case TAKE_EVENT:
			break;
		}
		st = convert(w, &ev, out, &deliver);
		mux_obj_unref(ev.obj);
		mux_obj_unref(ev.prev);
		if (st != MUX_OK)
			return st;
		w->progress = ev.rv;
		if (deliver) {
			sent(w, out->rv);
			return MUX_OK;
		}
	}
}

enum mux_status mux_watcher_snapshot(struct mux_watcher *w, struct mux_list *out)
{
	struct mux_cache *c = w->cache;
	enum mux_status st;

	*out = (struct mux_list){0};
	if (w->initial_next < w->ninitial)
		return MUX_TIMEOUT;
	pthread_mutex_lock(&c->lock);
	if (w->stopped || c->closed)
		st = MUX_CLOSED;
	else if (w->epoch != c->epoch || w->next_seq < c->window.first_seq)
		st = MUX_EXPIRED;
	else if (window_get(&c->window, w->next_seq))
		st = MUX_TIMEOUT;
	else if ((st = mux_cache_take_snapshot(c, &w->filter, out)) == MUX_OK)
		w->progress = out->rv;
	pthread_mutex_unlock(&c->lock);
	if (st != MUX_OK) {
		mux_list_free(out);
		return st;
	}
	mux_list_select(&w->filter, out);
	return MUX_OK;
}

uint64_t mux_watcher_progress(const struct mux_watcher *w)
{
	return w->progress;
}

void mux_watcher_stop(struct mux_watcher *w)
{
	struct mux_cache *c = w->cache;

	pthread_mutex_lock(&c->lock);
	w->stopped = true;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
}

void mux_watcher_free(struct mux_watcher *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->cache->lock);
	w->cache->watchers--;
	pthread_mutex_unlock(&w->cache->lock);
	drop_initial(w);
	free(w);
}
