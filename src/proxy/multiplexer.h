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
 * threads read it.  The table of resources is fixed at creation; a
 * resource's cache and informer are made once, under the multiplexer's lock.
 */
#ifndef YURTHUB_PROXY_MULTIPLEXER_H
#define YURTHUB_PROXY_MULTIPLEXER_H

#include <stdbool.h>
#include <stddef.h>

#include "http/request.h"

struct proxy;
struct multiplexer;

/* The default pool-scope resources, as --pool-scope-resources spells them
 * (group/version/resource, "" group for core). */
extern const char *const multiplexer_default_resources[];
extern const size_t multiplexer_default_count;

/* A multiplexer for resources[0..n) ("group/version/resource": "/v1/services",
 * "discovery.k8s.io/v1/endpointslices"), reading through proxy_url (the hub's
 * plain proxy port) as multiplexer-proxy-<node_name>.  Nothing starts before
 * the first request.  NULL when out of memory or a resource is malformed
 * (logged). */
struct multiplexer *multiplexer_new(const char *proxy_url, const char *node_name,
				    const char *const *resources, size_t n);
/* Stop every upstream and wake every local watcher (they end): the hub is
 * stopping.  The caches stay until multiplexer_free. */
void multiplexer_close(struct multiplexer *m);
/* After the server stopped (no reader left).  NULL is fine. */
void multiplexer_free(struct multiplexer *m);

/* Answer req from the multiplexer when it is a local list or watch of a
 * pool-scope resource that the cache can answer: 1 (answered: *rc is the
 * handler's result), or 0 (not the multiplexer's: the ordinary path). */
int multiplexer_answer(struct proxy *p, struct request *req, int *rc);

#endif
