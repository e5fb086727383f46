/*
 * cluster.h - what the hub knows of the cluster for the filters, kept
 * current by informers (docs/filters.md).
 *
 * The filters need the Services' openyurt.io/topologyKeys, this node's
 * pool (--nodepool-name, else its Node's apps.openyurt.io/nodepool label),
 * the pool's nodes (the NodePool's status.nodes, or the pool's NodeBuckets)
 * and the hub's configmap (yurt-hub-cfg: components added to filters, cache
 * agents).  The hub reads them as any client would, through its own proxy
 * port as component yurthub: online they come from the cloud and are cached,
 * offline - also after a reboot - from that cache.
 *
 * Readers (the proxy's connection threads) and the informers' threads meet
 * at one rwlock: a request's filters are chosen under it, and each object is
 * filtered with the environment held (cluster_env_ref).
 */
#ifndef YURTHUB_CLUSTER_CLUSTER_H
#define YURTHUB_CLUSTER_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "filter/filter.h"
#include "filter/rewrite.h"
#include "util/buf.h"

struct leader_hub;

struct cluster_settings {
	const char *proxy_url;	/* the hub's own proxy port: "http://127.0.0.1:10261"; NULL: none */
	const char *user_agent; /* "yurthub/<version>" */
	const char *node_name;
	const char *pool_name; /* --nodepool-name; "": the node's label */
	const char *namespace; /* --namespace: where yurt-hub-cfg is */
	const char *hub_host;  /* what the filters write as the API server's address */
	const char *hub_port;
	/* Does hub_port serve now (struct filter_env.hub_serving, with ctx)?
	 * NULL: always. */
	bool (*hub_serving)(void *ctx);
	bool enable_node_pool;	    /* pool topology from the NodePool */
	bool pool_service_topology; /* ... from NodeBuckets instead */
	/* the filters the flags allow (--enable-resource-filter,
	 * --disabled-resource-filters, the working mode) */
	bool filters_on;
	const char *const *disabled;
	size_t ndisabled;
	bool cloud_mode;
	/* yurt-hub-cfg's cache_agents changed (n 0: none, or the configmap is
	 * gone); called from an informer's thread, without locks held */
	void (*on_cache_agents)(void *ctx, const char *const *names, size_t n);
	/* non-NULL: watch the pool's leader-hub-<pool> configmap in
	 * --namespace (cluster/leaderhub.h), and call this with it when it
	 * changes, NULL when it is absent - or unknown (known false: no list
	 * of configmaps has been served yet, online or from the cache); from
	 * an informer's thread, calls serialised */
	void (*on_leader_hub)(void *ctx, const struct leader_hub *lh, bool known);
	/* know the NodePools' members (cluster_pool_member): this hub may
	 * lead its pool, and its leader port serves the pool's nodes only */
	bool pool_members;
	/* every input the filters need is synced (listed online, or loaded
	 * from the cache offline), the first time; from an informer's thread,
	 * once - or from cluster_run when there is nothing to read */
	void (*on_synced)(void *ctx);
	void *ctx;
	/* the informers' epoch (informer.h): the cloud's health changed */
	unsigned long (*epoch)(void *epoch_ctx);
	void *epoch_ctx;
};

struct cluster;

/* The view, empty: filters already run with it (settings are copied).
 * NULL when out of memory. */
struct cluster *cluster_new(const struct cluster_settings *s);
/* Starts the informers the settings need, once the proxy port listens.
 * 0, or -1 when a thread does not start. */
int cluster_run(struct cluster *c);
/* Stops the informers and frees; NULL is fine. */
void cluster_free(struct cluster *c);

/* Every informer has listed once, from the cloud or the cache (what
 * /v1/readyz waits for). */
bool cluster_synced(struct cluster *c);
/* What is not synced yet, for messages: "Services (/api/v1/services), ..."
 * appended to out; nothing when all is.  0, or -1 (ENOMEM). */
int cluster_describe_missing(struct cluster *c, struct buf *out);

/* The start-up rule (docs/filters.md): before the response of a request
 * (component, verb, resource) may be filtered, what its filters read must be
 * synced.  Returns 0 at once when no filter may touch the request (or the
 * view is synced), else waits up to timeout_ms for the inputs of the filters
 * it may get - while yurt-hub-cfg is not known, of every filter it could
 * name the component for.  -1 when the bound passed (or the hub stops), with
 * what is still missing appended to *missing. */
int cluster_wait_filters(struct cluster *c, const char *component, const char *verb,
			 const char *resource, unsigned timeout_ms, struct buf *missing);
/* The hub stops: cluster_wait_filters returns at once from now on. */
void cluster_stop_waits(struct cluster *c);

enum pool_membership {
	POOL_MEMBER,
	POOL_NOT_MEMBER,
	POOL_MEMBERS_UNKNOWN, /* the NodePools (or this node's pool) are not synced yet */
};
/* Whether node is in this node's NodePool's status.nodes, as last listed
 * (online, or from the cache offline).  *pool (malloc'ed, may stay NULL
 * when out of memory) names the pool for messages. */
enum pool_membership cluster_pool_member(struct cluster *c, const char *node, char **pool);

/* The filters for a request (filter_select on the current configuration). */
filter_mask cluster_filters_for(struct cluster *c, const char *component, const char *verb,
				const char *resource);
/* Moves whenever what the filters read changes: a Service's topology
 * annotation, this node's pool, the pool's nodes, whether the secure port
 * serves (settings.hub_serving, looked at on each call).  An open watch compares
 * it with the value it last filtered with, and filters again what it
 * showed when it moved (filter/follow.h).  The change is in the
 * environment before this moves. */
unsigned long cluster_filter_gen(struct cluster *c);
/* The environment, for rewrite_new(); valid as long as c. */
const struct filter_env_ref *cluster_env_ref(struct cluster *c);

#endif
