/*
 * informer.h - keeping a local copy of one kind of object up to date: a list
 * followed by watches, as client-go's reflector does, in C.
 *
 * The hub's response filters need to know a few things about the cluster (all
 * Services' topology annotations, this node's labels, its NodePool and
 * NodeBuckets, the yurt-hub-cfg ConfigMap).  Like YurtHub, the hub reads them
 * through its own proxy port with User-Agent yurthub/<version>: the answers
 * are then cached under the component "yurthub", and the same informers
 * answer from that cache when the cloud is down, also after a reboot
 * without the cloud.
 *
 * An informer runs one thread.  It lists the resource (streamed, one object
 * at a time: the memory it holds is one object, never the list), then
 * watches from the list's resourceVersion, and hands each object to the
 * consumer's callbacks.  It does not keep the objects: the consumer keeps
 * what it needs (often one annotation per object, not the object).
 *
 * What the consumer sees:
 *
 *   on_list_begin            a full list (status 200) starts streaming;
 *   on_object(UPSERT, o)*    each item of it;
 *   on_list_end              it is complete: every object not seen since
 *                            on_list_begin is gone;
 *   or on_list_abort         it broke half way: nothing is known about the
 *                            objects not seen, keep them (the ones seen were
 *                            current, keeping their new state is right);
 *   on_object(UPSERT|DELETE) then, from the watch, one event at a time.
 *
 * A list is started again (relist) when the watch reports an error (410
 * Expired: its resourceVersion left the server's history), when a watch
 * request gets an HTTP error, or when a list failed.  A watch that ends
 * normally, or whose connection breaks, is followed by another from the last
 * resourceVersion seen (bookmarks included); if that one is too old, the 410
 * it gets leads to a relist.  Failures are followed by a pause: 1 s, doubling
 * up to 30 s, plus up to a quarter more at random, so that many informers do
 * not come back together.  A 404 for the list means the cloud does not serve
 * the resource (a NodePool CRD that is not installed): that is an empty list,
 * the informer counts as synced, and it tries again every 60 s.
 *
 * The callbacks run in the informer's thread, one at a time; they must not
 * call informer_stop on their own informer.  libcurl must have been
 * initialised (curl_global_init) before informer_start.
 */
#ifndef YURTHUB_INFORMER_INFORMER_H
#define YURTHUB_INFORMER_INFORMER_H

#include <stdbool.h>

#include "kube/stream.h"

enum informer_event { INFORMER_UPSERT, INFORMER_DELETE };

struct informer_spec {
	/* "/api/v1/services", "/apis/apps.openyurt.io/v1beta2/nodepools" */
	const char *path;
	/* extra query, already escaped ("labelSelector=a%3Db",
	 * "fieldSelector=metadata.name%3Dx"), or NULL */
	const char *query;
	void (*on_list_begin)(void *ctx);
	/* o and its strings are valid during the call only */
	void (*on_object)(void *ctx, enum informer_event ev, const struct stream_object *o);
	void (*on_list_end)(void *ctx);
	void (*on_list_abort)(void *ctx);
	void *ctx;
	/* For a consumer that keeps a copy at a resourceVersion (the
	 * multiplexer): right after on_list_end, the list's
	 * metadata.resourceVersion ("" for a 404); and each watch BOOKMARK (the
	 * resource is current at o->resource_version). */
	void (*on_list_rv)(void *ctx, const char *resource_version);
	void (*on_bookmark)(void *ctx, const struct stream_object *o);
	/* Optional: a counter that moves when the hub's view of the cloud
	 * changes (health_generation).  A pause before asking again ends when
	 * it has moved since the last request went out: a list answered "not
	 * served" while the cloud was out of reach (on a first boot, before
	 * the hub has its certificate) is asked again as soon as it is back,
	 * not a minute later. */
	unsigned long (*epoch)(void *epoch_ctx);
	void *epoch_ctx;
};

struct informer;

/* Start listing and watching base_url + spec->path (base_url without a
 * trailing '/': "http://127.0.0.1:10261").  The strings are copied; any
 * callback may be NULL.  NULL when an argument or spec->path is NULL, out
 * of memory, or no thread starts. */
struct informer *informer_start(const char *base_url, const char *user_agent,
				const struct informer_spec *spec);
/* A first list has completed (or was a 404).  Atomic: any thread. */
bool informer_synced(const struct informer *inf);
/* List again (the watch in progress ends), at once or RELIST_MIN_MS after
 * the last list, whichever is later: what the consumer keeps from it was
 * not all kept (the store failed).  Any thread. */
void informer_relist(struct informer *inf);
/* Stop: the transfer in progress is abandoned and a pause cut short, so
 * this returns within a few milliseconds plus the callback running at the
 * time; joins the thread and frees.  NULL is fine. */
void informer_stop(struct informer *inf);

/* Objects every informer left out of what it handed on because no name
 * could be read (a NUL in it): the rest of their lists and watches went on.
 * Process-wide. */
unsigned long long informer_objects_skipped_total(void);

/* s escaped for a query value ("a=b" -> "a%3Db"), malloc'ed; NULL when out
 * of memory. */
char *informer_query_escape(const char *s);

#endif
