/*
 * watch_follow.h - a filtered watch proxied from the cloud (proxy/remote.c)
 * kept in step with what its filters read, as the multiplexer's are
 * (docs/filters.md, "Watches follow topology changes").  Offline watches
 * need none: nothing the filters read changes while the cloud is out of
 * reach.
 *
 * The watch's rewriter hands each object event to a follow
 * (filter/follow.h), which filters it and remembers what it showed.  When
 * cluster_filter_gen() moves (a topology input, or the secure port starts
 * or stops serving), the watch's content is read back from the store -
 * the component's cached copies of the collection, which its selectors
 * match: what the cloud sent, every event the watch carried written there
 * first - and filtered again; the follow sends what changed for the client.
 * When that cannot be trusted (nothing is cached for the watch, the cache
 * gave up on it, or the follow holds more than WATCH_FOLLOW_HELD_MAX
 * objects) the caller ends the watch with 410 Expired, and the client
 * lists again.
 */
#ifndef YURTHUB_PROXY_WATCH_FOLLOW_H
#define YURTHUB_PROXY_WATCH_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/manager.h"
#include "filter/rewrite.h"
#include "http/request.h"
#include "proxy/proxy.h"

/* What a follow may remember (one map entry, some 100 bytes, per object
 * its filters change or drop for the client) before it gives up. */
#define WATCH_FOLLOW_HELD_MAX 16384

struct watch_follow;

/* A follow for the watch req answered through rw (REWRITE_WATCH, with
 * mask's filters), whose content is component's cache.  from_rv: the
 * watch's resourceVersion; initial: its first events are the collection
 * (resourceVersion ""/"0"), so everything the client holds goes through
 * rw.  NULL with *err 0 when none is needed (no filter of mask reads an
 * input that may change), or -1 out of memory. */
struct watch_follow *watch_follow_new(struct proxy *p, const struct request *req,
				      struct rewrite *rw, filter_mask mask, const char *component,
				      bool initial, int *err);
void watch_follow_free(struct watch_follow *wf);

enum watch_follow_step {
	WATCH_FOLLOW_IDLE,   /* nothing moved, or what changed is written */
	WATCH_FOLLOW_WAIT,   /* the store is behind the watch: ask again later */
	WATCH_FOLLOW_CANNOT, /* end the watch with 410 Expired */
};
/* Call between two events of the client's stream: when the filters'
 * inputs moved, filter the content again and write what changed through
 * rw.  store: whether the store holds every event the watch carried
 * (cache_tee_settled). */
enum watch_follow_step watch_follow_step(struct watch_follow *wf, enum cache_tee_state store);

/* The ERROR event that ends a watch that cannot follow. */
extern const char watch_follow_expired[];

#endif
