/*
 * sharedcache.h - one pool-scope resource held in memory once for every
 * local client: the groundwork of the multiplexer (issue 14, docs/sharing.md).
 *
 * One upstream list+watch (a later part: the informer of component
 * multiplexer-proxy-<node>) writes into the cache; every local list and
 * watch of the resource is then served from it: a list is a snapshot at
 * the cache's resourceVersion, a watch starts from any resourceVersion still
 * inside the window of recent events (window.h).  Each version of each
 * object is one struct mux_obj (obj.h), shared by reference between the map,
 * the window, list snapshots and watchers, so memory does not grow with the
 * number of clients.
 *
 * Semantics, those of kube-apiserver's watch cache unless said otherwise:
 * - resourceVersions are the upstream's; the cache's rises with every event
 *   and bookmark and never goes back while the history lasts.
 * - A watch from rv 0 (the client sent "0" or nothing) first gets the
 *   current objects as ADDED, then what follows.  A watch from rv X gets
 *   every event after X, in order, or MUX_EXPIRED (410 "too old resource
 *   version") when X is older than the window; MUX_TOO_NEW when X is newer
 *   than the cache (mux_cache_wait_rv waits for it first).
 * - A watcher's filter is applied to the state before and after each event:
 *   an object that starts matching arrives as ADDED, one that stops as
 *   DELETED (its last matching state, at the event's resourceVersion).
 * - A relist (mux_cache_replace) is turned into the events that take the
 *   old content to the new, so watchers carry on.  kube-apiserver's cacher
 *   instead ends every watch and empties its history, which makes every
 *   client relist; one upstream relist must not become one per client.  Only
 *   a list older than the cache (an upstream whose history went back), or
 *   one with an object older than the cache's copy (which was the hub's own
 *   offline edit, cache/local_changes.h), resets the history: every watcher
 *   then gets MUX_EXPIRED and lists again.
 *
 * Threads and locks.  One writer (the upstream's thread) calls apply,
 * replace, bookmark and close; any number of readers (one per client
 * connection) list and watch.  Two mutexes, always taken in this order:
 *   1. write_lock: held by a write for its whole length, so writes never
 *      interleave; under it the writer may read the map without lock 2,
 *      since only writers change it;
 *   2. lock: the map, the window, rv, ready, closed, epoch, and each
 *      watcher's stop flag.  Held only to copy pointers and take references,
 *      to change the map and the window, and to wait on `changed`; never
 *      while a selector parses JSON or a copy is patched.
 * Readers take lock 2 only.  Objects are immutable and their reference
 * counts atomic, so a reader works on what it took without any lock.  A
 * watcher's fields other than its stop flag belong to its reader's thread.
 */
#ifndef YURTHUB_MUX_SHAREDCACHE_H
#define YURTHUB_MUX_SHAREDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mux/filter.h"
#include "mux/obj.h"
#include "mux/window.h"

enum mux_status {
	MUX_OK = 0,
	MUX_TIMEOUT,   /* nothing within the time given */
	MUX_CLOSED,    /* the cache closed, or the watcher was stopped */
	MUX_EXPIRED,   /* 410: the rv is older than the window, or the watcher fell behind it */
	MUX_TOO_NEW,   /* the rv is newer than the cache's */
	MUX_NOT_READY, /* no list yet (the multiplexer answers 429, Retry-After: 1) */
	MUX_STALE,     /* a write not newer than the cache: ignored */
	MUX_INVALID,   /* an argument that cannot be used */
	MUX_NOMEM,
};

/* A status's name, for logs and test messages. */
const char *mux_status_name(enum mux_status s);

struct mux_cache_config {
	/* The window: at most max_events events (0: 10,000), none older than
	 * max_age_ms (0: 3 minutes, YurtHub's; negative: no age bound). */
	size_t max_events;
	int64_t max_age_ms;
	/* The clock for event ages, monotonic milliseconds; NULL: the system's
	 * monotonic clock.  For tests. */
	int64_t (*clock_ms)(void *ctx);
	void *clock_ctx;
};

struct mux_cache;

/* NULL when out of memory.  config may be NULL (the defaults). */
struct mux_cache *mux_cache_new(const struct mux_cache_config *config);
/* Every watcher must have been freed.  NULL is fine. */
void mux_cache_free(struct mux_cache *c);
/* Wake every waiting reader with MUX_CLOSED; later lists and watches get it
 * too.  For the hub's stop. */
void mux_cache_close(struct mux_cache *c);

/* ---- the writer ---- */

/* An upstream watch event of type MUX_ADDED, MUX_MODIFIED or MUX_DELETED.
 * The cache takes over the caller's reference to o, also on failure.
 * MUX_NOT_READY before the first replace; MUX_STALE when o's rv is not above
 * the cache's (a replay). */
enum mux_status mux_cache_apply(struct mux_cache *c, enum mux_event_type type, struct mux_obj *o);
/* An upstream BOOKMARK: the cache is current at rv (when above its own). */
enum mux_status mux_cache_bookmark(struct mux_cache *c, uint64_t rv);
/* An upstream list at rv: the cache's content becomes objs[0..n) (the
 * cache takes over every reference; the array stays the caller's).  The
 * first one makes the cache ready.  Later ones record the differences as
 * events: changed objects in the order of their resourceVersions, then the
 * deletions, which carry rv (the list cannot tell when they happened).  A
 * list older than the cache resets the history (see above).  Two objects
 * with one key: the later counts. */
enum mux_status mux_cache_replace(struct mux_cache *c, struct mux_obj **objs, size_t n,
				  uint64_t rv);

/* Something outside the cache that readers' answers depend on (the hub's
 * filters' inputs) is at version v (never 0): the first call with a new v
 * notes the cache's rv then (the very first call notes 0).  Returns that
 * rv: an answer a client got at an rv up to it may have been made with an
 * older version.  Any thread. */
uint64_t mux_cache_outside_version(struct mux_cache *c, uint64_t v);

/* ---- readers ---- */

/* Wait until the cache is ready and at rv or later: MUX_OK, MUX_TIMEOUT,
 * MUX_CLOSED.  rv 0 waits for the first list only. */
enum mux_status mux_cache_wait_rv(struct mux_cache *c, uint64_t rv, int64_t timeout_ms);
uint64_t mux_cache_rv(struct mux_cache *c);

struct mux_cache_stats {
	size_t objects;	     /* in the map */
	size_t object_bytes; /* their JSON */
	size_t events;	     /* in the window */
	size_t watchers;
	uint64_t rv, window_start_rv;
};
void mux_cache_stats(struct mux_cache *c, struct mux_cache_stats *out);

/* A list: the objects that f lets through, sorted by key, at rv.  The
 * caller writes each objs[i]->data as it is (no copy) and frees the
 * snapshot with mux_list_free. */
struct mux_list {
	struct mux_obj **objs; /* references */
	size_t n;
	uint64_t rv;
};
/* f (NULL: everything) is only read during the call.  MUX_OK, MUX_NOT_READY,
 * MUX_CLOSED, MUX_NOMEM. */
enum mux_status mux_cache_list(struct mux_cache *c, const struct mux_filter *f,
			       struct mux_list *out);
void mux_list_free(struct mux_list *l);

struct mux_watch_options {
	uint64_t from_rv; /* 0: the current objects as ADDED first */
	/* borrowed: f's strings and selectors must outlive the watcher */
	const struct mux_filter *filter;
	/* > 0: mux_watcher_next gives a BOOKMARK at the watcher's progress when
	 * this long has passed without anything delivered and the progress has
	 * moved (allowWatchBookmarks) */
	int64_t bookmark_interval_ms;
};

struct mux_watcher;

/* MUX_OK and *out, or MUX_EXPIRED, MUX_TOO_NEW, MUX_NOT_READY, MUX_CLOSED,
 * MUX_NOMEM. */
enum mux_status mux_watch(struct mux_cache *c, const struct mux_watch_options *opts,
			  struct mux_watcher **out);

/* What a watcher delivers.  obj is a reference the caller owns (drop it
 * with mux_obj_unref once written); its bytes are what the client gets, at
 * the right resourceVersion.  A BOOKMARK has no obj, only rv. */
struct mux_delivery {
	enum mux_event_type type;
	uint64_t rv;
	struct mux_obj *obj;
};

/* The next event for this watcher, waiting up to timeout_ms for one:
 * MUX_OK and *out; MUX_TIMEOUT; MUX_CLOSED (stopped, or the cache closed);
 * MUX_EXPIRED (it fell behind the window, or a reset: the client must
 * relist); MUX_NOMEM.  One thread at a time per watcher. */
enum mux_status mux_watcher_next(struct mux_watcher *w, int64_t timeout_ms,
				 struct mux_delivery *out);
/* What a watcher's client holds, for when the hub's view of the same
 * objects must be computed again (its filters' inputs changed,
 * filter/follow.h).  Only once the watcher has delivered every event (its
 * initial objects too): MUX_OK and *out, the objects its filter lets
 * through at the cache's rv, which becomes its progress (free with
 * mux_list_free); MUX_TIMEOUT when events wait for it (deliver them and ask
 * again); MUX_CLOSED, MUX_EXPIRED, MUX_NOMEM.  The watcher's thread. */
enum mux_status mux_watcher_snapshot(struct mux_watcher *w, struct mux_list *out);
/* The resourceVersion up to which this watcher has been given (or skipped,
 * as filtered out) every event: what a bookmark may say. */
uint64_t mux_watcher_progress(const struct mux_watcher *w);
/* Make a waiting or later mux_watcher_next return MUX_CLOSED.  Any thread. */
void mux_watcher_stop(struct mux_watcher *w);
/* Unregister and free; by the watcher's thread, when no call is running on
 * it.  NULL is fine. */
void mux_watcher_free(struct mux_watcher *w);

#endif
