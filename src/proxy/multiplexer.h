/*
 * multiplexer.h - one upstream list+watch per pool-scope resource on the
 * node, and every local list and watch of it answered from memory (issue 14,
 * docs/sharing.md).
 *
 * The multiplexer holds one shared cache (mux/sharedcache.h) per pool-scope
 * resource (by default core v1 services and discovery.k8s.io/v1
 * endpointslices).  The first local list or watch of a resource creates its
 * cache and starts its upstream: an informer (informer/) through the hub's
 * own plain proxy port with User-Agent multiplexer-proxy-<node>, so that the
 * request takes the ordinary path - the cloud when healthy, the disk cache
 * otherwise - and, that component being a cache agent, its answers are
 * cached on disk like any agent's.  The informer gives bookmarks, a timeout
 * in [300, 600) s and resumes from its last resourceVersion; a 410 makes it
 * relist, which the cache turns into events (mux_cache_replace), so local
 * watchers carry on.
 *
 * Local clients (any User-Agent but the multiplexer's own) get lists and
 * watches from the cache, each through its own response filters
 * (filter/rewrite.h) applied to the bytes written for it: the shared
 * objects are never changed.  multiplexer_list.c and multiplexer_watch.c
 * write the answers.
 *
 * Threads: each resource's informer thread writes its cache; connection
 * threads read it.  The table of resources, and each resource's cache and
 * informer, change under the multiplexer's lock: the set follows
 * --pool-scope-resources, then the pool's leader-hub configmap.
 */
#ifndef YURTHUB_PROXY_MULTIPLEXER_H
#define YURTHUB_PROXY_MULTIPLEXER_H

#include <stdbool.h>
#include <stddef.h>

#include "http/request.h"

struct proxy;
struct multiplexer;
struct upstream;

/* A multiplexer for resources[0..n) ("group/version/resource": "/v1/services",
 * "discovery.k8s.io/v1/endpointslices"), reading through proxy_url (the hub's
 * plain proxy port) as multiplexer-proxy-<node_name>.  Nothing starts before
 * the first request.  NULL when out of memory or a resource is malformed
 * (logged). */
struct multiplexer *multiplexer_new(const char *proxy_url, const char *node_name,
				    const char *const *resources, size_t n);
/* The cloud, before the first request: whether it is reachable (a list
 * the upstream does not serve then means the resource does not exist), and
 * the upstreams' epoch (informer.h: the cloud's health changed). */
void multiplexer_set_cloud(struct multiplexer *m, struct upstream *up,
			   unsigned long (*epoch)(void *), void *ctx);
/* Start no upstream for up to ms, or until multiplexer_release(): the
 * pool's configmap, about to be read, may send the upstreams to a leader,
 * or name other resources.  Clients wait meanwhile. */
void multiplexer_hold(struct multiplexer *m, long ms);
void multiplexer_release(struct multiplexer *m);
/* Stop every upstream and wake every local watcher (they end): the hub is
 * stopping.  The caches stay until multiplexer_free. */
void multiplexer_close(struct multiplexer *m);
/* After the server stopped (no reader left).  NULL is fine. */
void multiplexer_free(struct multiplexer *m);

/* Replace the set of pool-scope resources ("group/version/resource"): new
 * ones start with their first request; removed ones stop their upstream,
 * and their watchers end (their clients list again, by the ordinary path).
 * 0, or -1 when one could not be added (logged; the others are). */
int multiplexer_set_resources(struct multiplexer *m, const char *const *gvrs, size_t n);

/* The store refused a write of component's answer to path (the cache
 * manager's on_failure): when it is the multiplexer's own upstream, its
 * disk copy misses something, and the upstream lists again (every 10 s at
 * most, until a list is stored whole). */
void multiplexer_store_failed(struct multiplexer *m, const char *component, const char *path);

/* Whether group/version/resource is pool-scope now (shared, and cached as
 * the multiplexer's upstream). */
bool multiplexer_shares(struct multiplexer *m, const char *group, const char *version,
			const char *resource);

/* Whether req is the multiplexer's own upstream list or watch of a
 * pool-scope resource (which a follower sends to its pool's leader). */
bool multiplexer_is_upstream(struct multiplexer *m, const struct request *req);

/* Answer req from the multiplexer when it is a local list or watch of a
 * pool-scope resource that the cache can answer: 1 (answered: *rc is the
 * handler's result), or 0 (not the multiplexer's: the ordinary path). */
int multiplexer_answer(struct proxy *p, struct request *req, int *rc);
/* Answer another hub of the pool (this hub is their leader): a list or
 * watch of a pool-scope resource, unfiltered; anything else - Secrets
 * always - is 403.  The handler's result.  Secrets are never pool-scope:
 * multiplexer_new and multiplexer_set_resources drop them, logged. */
int multiplexer_answer_peer(struct proxy *p, struct request *req);
/* Whether the hub of node (from its verified certificate) may use the
 * leader port: only the nodes of this node's NodePool (status.nodes) may;
 * another gets 403, and all get 503 (Retry-After) while the pool's
 * members are not known.  1 admitted, else the answer's result. */
int multiplexer_admit_peer(struct proxy *p, struct request *req, const char *node);

#endif
