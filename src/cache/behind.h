/*
 * behind.h - the list views whose cached copy fell behind the cloud, and
 * the hub's own relist that brings them back (docs/contracts.md, "What a
 * failed write does to a view").
 *
 * A watch event the store could not take (etcd stalled or down, a full or
 * failing disk), a list it could not store, or a response the cache gave up
 * on, leaves the view's cached copy behind: a DELETED that was not applied
 * leaves the object in the store, and the client that got the event never
 * asks again (client-go watches on from its last resourceVersion).  So the
 * cache manager marks the view here, and
 *
 *  - the mark is kept on disk, in a small file allocated when the hub
 *    starts and then only rewritten in place (two slots, the newer valid
 *    one wins), so that recording it needs no new space on a full disk and
 *    a hub restarted while a view is behind still knows it;
 *  - while a resource has a view behind, offline answers about it carry a
 *    Warning header and yurthub_store_views_behind counts the views;
 *  - a thread lists each marked view again through the hub's own proxy
 *    port, as the view's component (the cloud's answer goes through the
 *    cache like any list), as soon as the store takes writes again (or
 *    after a pause, doubling up to RESYNC_MAX_SECONDS) and the cloud is
 *    reachable; the list's commit clears the mark.
 *
 * Thread-safe.
 */
#ifndef YURTHUB_CACHE_BEHIND_H
#define YURTHUB_CACHE_BEHIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/metrics.h"
#include "storage/store.h"

struct views_behind;

/* file: where the marks are kept (NULL: in memory only); the marks it
 * holds are loaded.  NULL only without memory. */
struct views_behind *views_behind_open(const char *file, struct metrics *m);
/* Stops the resync thread first. */
void views_behind_free(struct views_behind *b);

/* A write of view v (whose requests go to path, e.g. "/api/v1/pods") was
 * lost; rv: that of the lost event, 0 when unknown (a list). */
void views_behind_mark(struct views_behind *b, const struct store_view *v, const char *path,
		       uint64_t rv);
/* A list of v at list_rv was stored: its mark goes, unless a lost event
 * was newer than the list. */
void views_behind_listed(struct views_behind *b, const struct store_view *v, uint64_t list_rv);
/* Whether any view of this resource is behind; when so, since (wall clock
 * seconds) the oldest mark was made. */
bool views_behind_resource(struct views_behind *b, const struct store_gvr *gvr, int64_t *since);
size_t views_behind_count(struct views_behind *b);
/* The store writes again: relist now rather than after the pause. */
void views_behind_wake(struct views_behind *b);

/* What `yurthub cache verify` says of a marks file's bytes (read, never
 * written): fn for each view behind, in the order marked; the number of
 * views, or -1 when no slot of the file is valid. */
struct view_behind_info {
	const char *component, *group, *version, *resource, *namespace, *label_selector,
	    *field_selector;
	int64_t since; /* wall clock seconds */
};
long views_behind_decode(const char *data, size_t len,
			 void (*fn)(void *ctx, const struct view_behind_info *v), void *ctx);

/* Start relisting the marked views through proxy_url (the hub's plain
 * proxy port) while cloud_ok(ctx) says the cloud is reachable.  0 or -1. */
int views_behind_start(struct views_behind *b, const char *proxy_url, bool (*cloud_ok)(void *),
		       void *ctx);
void views_behind_stop(struct views_behind *b);

#endif
