/*
 * follow.h - one watch's filtered view kept in step with the filters'
 * inputs (docs/filters.md, "Watches follow topology changes").
 *
 * A filter's answer for an object depends on more than the object: on the
 * Service's topology annotation, the pool's members, the node's pool.  When
 * those change, an open watch of EndpointSlices or Services would keep what
 * it showed until the object itself changes.  A follow sits between a
 * watch's source of unfiltered events and its client: it filters each event
 * and remembers, per object, what the client was shown when that differs
 * from the source's object (filtered, or dropped).  When the inputs change,
 * the source's content (what the client's selector lets through, every event
 * up to some resourceVersion delivered) is filtered again and compared with
 * what was shown: each difference becomes one event, MODIFIED with the new
 * filtered object, DELETED for an object now dropped, ADDED for one now
 * kept, at that resourceVersion.
 *
 * The follow knows nothing of where the events come from: the multiplexer's
 * shared cache feeds one, its content the cache's objects; a proxied watch
 * (proxy/watch_follow.h) feeds one from its rewriter (rewrite_on_event),
 * its content read back from the store (local_each_object).
 * Memory: one entry per object the filters change or drop for this client,
 * none for the objects it passes as they are.
 */
#ifndef YURTHUB_FILTER_FOLLOW_H
#define YURTHUB_FILTER_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/rewrite.h"
#include "kube/stream.h"

/* One event for the client: type WATCH_ADDED, WATCH_MODIFIED or
 * WATCH_DELETED, the object's bytes (without kind when the source's lack
 * it), valid during the call.  0 to go on, non-zero stops. */
typedef int (*follow_emit_fn)(void *ctx, enum watch_type type, const char *data, size_t len);

struct follow;

/* A follow for a watch filtered by mask on resource t, with the hub's
 * environment env.  NULL when out of memory. */
struct follow *follow_new(filter_mask mask, const struct filter_target *t,
			  const struct filter_env_ref *env, follow_emit_fn emit, void *ctx);
void follow_free(struct follow *f);

/* One event of the source, of type WATCH_ADDED (new to this client's
 * selector), WATCH_MODIFIED or WATCH_DELETED, with the object unfiltered.
 * Emits what the client gets, as the proxied watches do (rewrite.h): an
 * object the filters drop comes as DELETED, as the source has it; one the
 * client was last told was deleted (dropped) comes as ADDED.  0, or -1 (out
 * of memory, or emit stopped). */
int follow_event(struct follow *f, enum watch_type type, const struct stream_object *o);

/* The filters' inputs changed: objs[0..n) is the source's content the
 * client's selector lets through, and the client has had every event up to
 * rv.  Emits an event for each object now filtered otherwise than shown,
 * its resourceVersion set to rv; forgets what it held of objects not in
 * objs.  unknown: what the client holds was not shown through f (a watch
 * resumed from a resourceVersion the inputs may have changed after): every
 * object is sent, MODIFIED as now filtered or DELETED when dropped, which
 * takes a client-go informer to the right state whatever it held.  0, or
 * -1 as follow_event. */
int follow_refilter(struct follow *f, const struct stream_object *objs, size_t n, uint64_t rv,
		    bool unknown);

/* The same in steps, for a source read an object at a time (the store,
 * for a proxied watch): begin, each object of the source's
 * content as follow_refilter's objs, end (which forgets what is held of the
 * objects not met).  Each 0, or -1 as follow_refilter. */
int follow_refilter_begin(struct follow *f);
int follow_refilter_object(struct follow *f, const struct stream_object *o, uint64_t rv,
			   bool unknown);
int follow_refilter_end(struct follow *f);

/* How many objects the client was shown otherwise than the source has them. */
size_t follow_held(const struct follow *f);
/* Objects the follow's filters changed and dropped so far (metrics). */
void follow_counts(const struct follow *f, unsigned long *changed, unsigned long *dropped);

#endif
