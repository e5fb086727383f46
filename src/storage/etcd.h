/*
 * etcd.h - the etcd store: the cache in a real etcd v3 cluster shared by a
 * pool of nodes, objects laid out exactly as kube-apiserver lays them out
 * (docs/contracts.md §4), so that a kube-apiserver pointed at the same etcd serves
 * them.  See docs/etcd-store.md for the records and the replace protocol.
 */
#ifndef YURTHUB_STORAGE_ETCD_H
#define YURTHUB_STORAGE_ETCD_H

#include <stddef.h>

#include "etcd/client.h"
#include "storage/store.h"

struct etcd_store_config {
	const char *const *endpoints;
	size_t nendpoints;
	const char *ca_file, *cert_file, *key_file; /* NULL when unused */
	const char *prefix;			    /* kube-apiserver's --etcd-prefix */
	const char *node;			    /* this node's name: whose records */
	long timeout_ms;			    /* each etcd call; 0: 5000 */
};

/* A store on etcd.  Does not need etcd to be up: calls fail with
 * STORE_UNAVAILABLE until it is.  NULL with *err on a bad configuration. */
struct store *etcd_store_open(const struct etcd_store_config *cfg, char **err);

/* Counters, for tests and benchmarks. */
struct etcd_store_stats {
	unsigned long txns, read_txns, retries, splits;
};
void etcd_store_stats(struct store *s, struct etcd_store_stats *out);

/* etcd's NOSPACE alarm as the store's writes meet it (etcd/client.h):
 * for /v1/readyz?verbose and the metrics. */
void etcd_store_nospace(struct store *s, struct etcd_nospace *out);

/* Housekeeping, run now and then: tombstones (the records that keep a
 * deleted object's last resourceVersion, so that no older copy brings it
 * back) older than tombstone_age_s seconds go, and so do this node's
 * holdings of objects deleted behind the hub's back (e.g. through a
 * kube-apiserver on the same etcd).  Returns the number of records
 * removed, or -1. */
long etcd_store_gc(struct store *s, long tombstone_age_s);

/* Roll back the replaces that ended without their commit (a hub killed, or
 * etcd gone, in the middle of a list of more than one Txn): this node's
 * at once (its previous run's, or its own that failed), another node's
 * once its record was not refreshed for abandoned_after_s seconds.  Their
 * holdings lose the view's id (docs/etcd-store.md).  Returns how many
 * were rolled back, or -1 when etcd failed (tried again at the next call). */
long etcd_store_recover(struct store *s, long abandoned_after_s);

/* Check every record under the prefix (all nodes), as they were at one
 * revision: holdings, their S/m records and the objects agree.  fn, when
 * set, is told of each problem, and of each replace in flight or
 * abandoned ("replace in progress by node X since T ..."), whose holdings
 * are not problems.  Returns the number of problems, or -1 when etcd could
 * not be read. */
typedef void (*etcd_verify_fn)(void *ctx, const char *problem, const char *key);
long etcd_store_verify(struct store *s, etcd_verify_fn fn, void *ctx);

/* The resources (RESOURCE.VERSION.GROUP) the component has views of. */
enum store_err etcd_store_resources(struct store *s, const char *component, store_name_fn fn,
				    void *ctx);

#endif
