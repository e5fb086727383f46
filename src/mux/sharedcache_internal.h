/*
 * sharedcache_internal.h - the shared cache's state, shared by its two
 * halves: sharedcache.c (the writer, lists) and watcher.c (watchers).  The
 * lock discipline is in sharedcache.h.
 */
#ifndef YURTHUB_MUX_SHAREDCACHE_INTERNAL_H
#define YURTHUB_MUX_SHAREDCACHE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mux/sharedcache.h"
#include "mux/window.h"
#include "util/strmap.h"

struct mux_cache {
	struct mux_cache_config cfg; /* defaults filled in */

	pthread_mutex_t write_lock; /* 1: one write at a time */
	pthread_mutex_t lock;	    /* 2: everything below */
	pthread_cond_t changed;	    /* an event, a bookmark, a list, a stop, the close */
	struct strmap objs;	    /* key (mux_obj_key) -> struct mux_obj * (a reference) */
	size_t object_bytes;	    /* the JSON of objs */
	struct mux_window window;
	uint64_t rv;	/* the cache is current at this resourceVersion */
	uint64_t epoch; /* +1 at each reset of the history */
	bool ready;	/* a list has been replaced in */
	bool closed;
	size_t watchers; /* registered, not yet freed */
	/* mux_cache_outside_version: the last version noted, and the rv the
	 * cache had when it was first noted */
	uint64_t outside_version, outside_rv;
};

/* pthread_cond_timedwait on c->changed (which runs on the monotonic clock)
 * until deadline_ms; c->lock held. */
void mux_cache_wait_until(struct mux_cache *c, int64_t deadline_ms);

/* References to the objects of the namespace f names (all when none), at
 * the cache's rv; c->lock held.  MUX_OK, MUX_CLOSED, MUX_NOT_READY,
 * MUX_NOMEM (out then holds what to mux_list_free). */
enum mux_status mux_cache_take_snapshot(struct mux_cache *c, const struct mux_filter *f,
					struct mux_list *out);
/* Keep what f's selectors let through; without the lock (they parse JSON). */
void mux_list_select(const struct mux_filter *f, struct mux_list *l);

#endif
