/*
 * manager.h - turning responses that pass through the hub into store
 * operations, without ever slowing the response down.
 *
 * A "tee" sits on one response: the proxy feeds it every body byte it hands
 * to the client.  A list's bytes are only copied into the queue of a worker
 * thread, which decodes them (inflating gzip first) and calls the store, so
 * that the client never waits for the decoder or the disk; a watch's bytes
 * are decoded by the tee into one small job per event.  Jobs of one view always go to the same
 * worker, so a list's items and the watch events of that view are applied in the order they came.
 * If the workers fall behind by more than a bound of queued bytes, the tee gives up on that
 * response (counted, logged) rather than hold the client: caching is a side effect.  A list
 * that holds more than a cached list may (cache/list_bounds.h) is not cached either.
 *
 *   LIST     streaming replace of the request's view; a paginated list
 *            (limit/continue) is kept open across its pages and committed
 *            with the last one
 *   WATCH    each event is the store's view_event (store.h): ADDED/MODIFIED
 *            write in rv order; DELETED removes the component's copy unless a
 *            newer one is held; BOOKMARK: the view's rv; ERROR: the cache
 *            side stops
 *   OBJECT   get, and the object returned by create/update/patch
 *   DISCOVERY  /version and discovery documents, as cluster info
 */
#ifndef YURTHUB_CACHE_MANAGER_H
#define YURTHUB_CACHE_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/cacheable.h"
#include "kube/requestinfo.h"
#include "metrics/metrics.h"
#include "storage/store.h"

struct cache_manager;
struct cache_tee;

struct cache_manager *cache_manager_new(struct store *s, struct metrics *m, int workers);
/* Before the first response: fn is called, from a worker's thread, for every
 * write the store refuses (a broken store: I/O, full, down), with the
 * response's component and path: a consumer that can ask again (the
 * multiplexer's upstream) makes its view whole again that way. */
void cache_manager_on_failure(struct cache_manager *cm,
			      void (*fn)(void *ctx, const char *component, const char *path),
			      void *ctx);
struct local_changes;
/* Before the first response: the journal of the hub's offline edits
 * (local_changes.h), which the cloud's copies replace. */
void cache_manager_set_local_changes(struct cache_manager *cm, struct local_changes *lc);
struct views_behind;
/* Before the first response: where views a lost write left behind are
 * marked (cache/behind.h), and cleared by their next stored list. */
void cache_manager_set_views_behind(struct cache_manager *cm, struct views_behind *b);
struct views_behind *cache_manager_views_behind(struct cache_manager *cm);
/* The store's last write failed (it is broken: I/O, full, down), and none
 * has succeeded since. */
bool cache_manager_store_failing(struct cache_manager *cm);
/* The hub stops: from now on lists are neither decoded nor stored (one
 * being decoded is dropped at its next item, its tee copies no more), so
 * that cache_manager_free() does not wait for millions of items; objects
 * and watch events still queued are stored. */
void cache_manager_stop(struct cache_manager *cm);
/* Finish queued work (lists only until cache_manager_stop()), stop the
 * workers. */
void cache_manager_free(struct cache_manager *cm);
/* Block until every job queued so far is done (tests, shutdown). */
void cache_manager_flush(struct cache_manager *cm);

/* A tee for one response, or NULL when this response is not cached (status,
 * content type or encoding the cache cannot use). */
struct cache_tee *cache_tee_new(struct cache_manager *cm, enum cache_mode mode,
				const char *component, const struct request_info *ri, int status,
				const char *content_type, const char *content_encoding);
/* Every body byte, in order. */
void cache_tee_feed(struct cache_tee *t, const char *data, size_t len);
/* The body is over: complete when it ended cleanly, false when it was cut.
 * Frees the tee. */
void cache_tee_end(struct cache_tee *t, bool complete);

enum cache_tee_state {
	CACHE_TEE_SETTLED, /* every event fed so far is in the store */
	CACHE_TEE_BEHIND,  /* some are still queued */
	CACHE_TEE_LOST,	   /* not all will be: no tee, or it gave up, or the store refused one */
};
/* A watch's tee: does the store hold every event fed so far?  What a proxied
 * watch showed is read back from the store (proxy/remote.c, filter/follow.h)
 * only once it does. */
enum cache_tee_state cache_tee_settled(const struct cache_tee *t);

/* The store key of an object for a component (shared with the local proxy). */
enum store_err cache_object_key(struct store *s, const char *component,
				const struct request_info *ri, const char *ns, const char *name,
				struct store_key *out);

#endif
