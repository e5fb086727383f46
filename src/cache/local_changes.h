/*
 * local_changes.h - the changes the hub makes to its own cache while the
 * cloud is unreachable (kubelet's status patches, and the EndpointSlices and
 * Endpoints that follow this node's pods), and the resourceVersions they get.
 *
 * The scheme (docs/offline.md, "Local changes"):
 *  - A local change gets a *local resourceVersion*: one above the newest rv
 *    the hub has seen of that resource (from the cloud, or issued before),
 *    so that no client sees an rv go backwards while the node is offline.
 *  - Each changed object is journaled (component, resource, namespace, name,
 *    rv) before it is written; the journal and the range of issued rvs are
 *    kept in the store (cluster info "/yurthub/local-changes"), so both
 *    survive a restart, on the disk and the etcd store alike.
 *  - Offline watches deliver journaled changes newer than their rv as
 *    MODIFIED events (local_changes_since()); the journal is their history.
 *  - Once the cloud answers, a list or watch at an issued local rv is
 *    answered 410 (local_changes_rv_issued()): client-go then lists again,
 *    from the cloud.  An rv of the range the cloud is seen to use is the
 *    cloud's, and no longer answered so; the whole range is retired ten
 *    minutes after the cloud came back.  A claim after the cloud went past
 *    the range starts a new one.
 *  - The cloud's copy of a journaled object replaces the local edit
 *    whatever their rvs say (the cache manager asks local_changes_is_local()
 *    and settles the entry with local_changes_settled()).
 *
 * Thread-safe.  The cache manager (workers), the offline answers and the
 * proxy's request path share one instance, owned by the hub.
 */
#ifndef YURTHUB_CACHE_LOCAL_CHANGES_H
#define YURTHUB_CACHE_LOCAL_CHANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"

struct local_changes;

/* One journaled object (strings owned by whoever made the struct). */
struct local_change {
	char *component, *group, *version, *resource, *namespace, *name;
	uint64_t rv;
};

/* Load the journal from the store (a missing or unreadable one: empty).
 * NULL on ENOMEM. */
struct local_changes *local_changes_open(struct store *s);
void local_changes_free(struct local_changes *lc);

/* The cloud gave an object or a list at rv (the cache manager, for what it
 * stores).  from_list: a list's rv, newer than anything stored before. */
void local_changes_saw_cloud_rv(struct local_changes *lc, uint64_t rv, bool from_list);

/* Issue one local rv for a change of the n objects at keys (the copies of
 * one object held by several components), journal them at that rv, and
 * save the journal: the rv, or 0 when it could not be saved (then the
 * journal is as before, and a write of the objects is no local change: it
 * keeps the rv it had, and no watcher is told).  A write that fails after
 * a claim is reported with local_changes_write_failed. */
uint64_t local_changes_claim(struct local_changes *lc, const struct store_key *keys, size_t n);

/* The write claimed for key failed; the store holds the copy at stored_rv
 * (0: none, or unknown).  The entry goes back to that copy when it is a
 * local one, else it goes. */
void local_changes_write_failed(struct local_changes *lc, const struct store_key *key,
				uint64_t stored_rv);

/* Journaled changes of gvr (in namespace ns, "" for all) newer than after,
 * in rv order, one per object and rv: *out (free with
 * local_changes_list_free), their number, or -1 on ENOMEM. */
long local_changes_since(struct local_changes *lc, const struct store_gvr *gvr, const char *ns,
			 uint64_t after, struct local_change **out);
void local_changes_list_free(struct local_change *v, long n);
/* The newest local rv issued for gvr, 0 if none: a list's rv is at least
 * that, as its items may carry it. */
uint64_t local_changes_last_rv(struct local_changes *lc, const struct store_gvr *gvr);

/* Whether rv is a local rv still in use (to be answered 410 online). */
bool local_changes_rv_issued(struct local_changes *lc, uint64_t rv);

/* Whether the component's copy at key is a local edit (fast when the
 * journal is empty). */
bool local_changes_is_local(struct local_changes *lc, const struct store_key *key);
/* The cloud's copy replaced it (or the cloud has none): the entry goes. */
void local_changes_settled(struct local_changes *lc, const struct store_key *key);
/* Journaled keys of one component's collection (namespace "" for all):
 * as local_changes_since, whatever their rv. */
long local_changes_of(struct local_changes *lc, const char *component, const struct store_gvr *gvr,
		      const char *ns, struct local_change **out);

#endif
