/*
 * local.h - answering from the store when the cloud cannot be reached
 * (docs/contracts.md §6), as the API server would:
 *
 *   get          the cached object (kind/apiVersion filled in), or 404
 *
 * Every answer that carries objects goes through the requesting component's
 * response filters: the store holds the cloud's objects (docs/filters.md).
 *
 *   list         from a cached view that covers the request (same or wider
 *                namespace; same selector, or an unfiltered view), with the
 *                request's selectors evaluated, limit/continue honoured and the
 *                view's resourceVersion; never listed: 404; listed empty: []
 *   watch        200 chunked; initial ADDED events when asked for (rv 0/unset,
 *                sendInitialEvents), the initial-events-end bookmark, bookmark
 *                heartbeats; ends at timeoutSeconds, and within 2 s after the
 *                cloud is back so that clients re-list from it
 *   writes       only those this node could make online (kube/offline_authz.h),
 *                judged before anything is stored; any other is 403:
 *   create       201 echoing this node's Node or Lease; Events are kept to be
 *                sent later; a TokenRequest for a pod of this node: a token
 *   update/patch applied to the cached object at a local resourceVersion
 *                (cache/local_changes.h), 200 (a status write changes the
 *                status only); watchers get it as MODIFIED, and endpoints
 *                follow this node's pods (local_follow.c)
 *   delete       403
 *   discovery    from the cached documents
 *
 * A component that has no cache of its own for a request (kubectl, say) is
 * answered from another component's cache: it is the same node's view.
 */
#ifndef YURTHUB_PROXY_LOCAL_H
#define YURTHUB_PROXY_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include "filter/rewrite.h"
#include "http/request.h"
#include "storage/store.h"
#include "util/buf.h"

struct proxy;

/* Answer req from the store, as the API server would. */
int local_answer(struct proxy *p, struct request *req);

/* ---- shared by local.c and local_list.c ---- */

/* The components to look in for req: its own first, then every other. */
struct component_list {
	char **v;
	size_t n;
};
int local_components(struct proxy *p, const char *own, struct component_list *out);
/* The same, with the store's error when it cannot say (out is then empty). */
enum store_err local_components_read(struct proxy *p, const char *own, struct component_list *out);
void local_components_free(struct component_list *l);

/* A store that cannot be read (etcd unreachable or stalled, a disk that
 * answers EIO) is not a store that holds nothing: offline, such a read is
 * answered 503 ServiceUnavailable with Retry-After, never 404 (which
 * clients take for "gone").  local_store_down says which errors those
 * are; local_store_unavailable answers. */
bool local_store_down(enum store_err e);
struct reply;
/* A Warning header on an offline answer about a resource one of whose
 * cached views is behind the cloud (cache/behind.h); nothing otherwise. */
void local_stale_warning(struct proxy *p, const struct request *req, struct reply *r);
int local_store_unavailable(struct request *req, enum store_err e);

/* Kind and apiVersion of the request's resource ("Pod", "v1"); kind NULL
 * when unknown.  Free with local_kind_free. */
struct local_kind {
	char *kind;
	char *api_version;
};
void local_kind_of(struct proxy *p, const struct request *req, struct local_kind *out);
void local_kind_free(struct local_kind *k);

/* Append obj to out, with kind/apiVersion added when it lacks them (objects
 * cached from lists do). */
int local_append_object(struct buf *out, const char *obj, size_t len, const struct local_kind *k);

/* The response filters of req's component (docs/filters.md), on the way
 * out: the store holds the cloud's objects.  0 with *rw NULL when none
 * apply, or a rewriter of that shape whose output goes to out(ctx); -1 out
 * of memory. */
int local_rewrite_new(struct proxy *p, const struct request *req, enum rewrite_shape shape,
		      rewrite_out_fn out, void *ctx, struct rewrite **rw);
/* Count what rw did in the filters' metrics, and free it. */
void local_rewrite_free(struct proxy *p, struct rewrite *rw);

/* The Status answers. */
int local_status(struct request *req, int code, const char *message);
/* A Status's details, {["name":...,]["group":...,]"kind":...}, written to
 * out: out's text, or NULL on ENOMEM (the Status goes without). */
const char *local_status_details(struct buf *out, const char *name, const char *group,
				 const char *kind);

/* A write of k at a claimed local rv failed: the journal follows what the
 * store holds (local_changes_write_failed). */
void local_write_failed(struct proxy *p, const struct store_key *k);

/* A pod of this node changed offline from old to upd (both JSON): the
 * cached EndpointSlices and Endpoints that target it follow (local_follow.c). */
void local_follow_pod(struct proxy *p, const char *old, size_t old_len, const char *upd,
		      size_t upd_len);

/* Each object of component's cache of ri's collection (api_group,
 * api_version, resource, namespace) that ri's label and field selectors
 * match, to fn, named by its store key; fn returns non-zero to stop.  0,
 * or -1 (the store failed, a selector does not parse, out of memory, fn
 * stopped).  A collection never cached has no objects. */
typedef int (*local_object_fn)(void *ctx, const struct stream_object *o);
int local_each_object(struct proxy *p, const char *component, const struct request_info *ri,
		      local_object_fn fn, void *ctx);

/* Does a watch of ri begin with the collection's objects as ADDED
 * (resourceVersion ""/"0", or sendInitialEvents=true)? */
bool local_wants_initial_events(const struct request_info *ri);

/* Lists and watches: local_list.c. */
int local_list(struct proxy *p, struct request *req);
int local_watch(struct proxy *p, struct request *req);

/* What offline watches and the multiplexer's (multiplexer_watch.c) share:
 * a watch's length in seconds (timeoutSeconds, else random in [min, 2 min)
 * as kube-apiserver), whether the client closed fd, and the answer to a
 * watch from a resourceVersion older than the history (an ERROR event with
 * a 410 Expired Status). */
long local_watch_seconds(const struct request_info *ri, int min_timeout);
bool local_client_left(int fd);
int local_too_old(struct request *req, uint64_t from, uint64_t current_rv);

#endif
