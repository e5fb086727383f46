/*
 * autonomy.h - can this node run on its own?  (docs/offline.md)
 *
 * The node can carry on without the cloud when what its essential
 * components need to start over is cached and the store takes writes:
 *
 *   kubelet     its pods (a list view) and its own Node (a list view or
 *               the object): always;
 *   kube-proxy  services and EndpointSlices;
 *   coredns     services, EndpointSlices and namespaces;
 *
 * kube-proxy's and coredns's only when the node runs them (the hub holds
 * something of theirs); a pool-scope resource counts as cached when the
 * multiplexer's upstream holds it.  The verdict, with the first reason it
 * is not, feeds yurthub_autonomy_ready and /v1/readyz?verbose.
 */
#ifndef YURTHUB_CACHE_AUTONOMY_H
#define YURTHUB_CACHE_AUTONOMY_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/manager.h"
#include "storage/store.h"

struct autonomy_inputs {
	struct store *store;
	struct cache_manager *cache; /* whether the store takes writes */
	const char *node_name;
	/* the multiplexer's component ("multiplexer-proxy-<node>"), NULL without
	 * one; is_shared says whether it holds a resource for everyone */
	const char *mux_component;
	bool (*is_shared)(void *ctx, const char *group, const char *version, const char *resource);
	void *ctx;
};

/* The verdict now: true when the node can run on its own; else *why (at
 * most whylen bytes, NUL-terminated) says what is missing first. */
bool autonomy_check(const struct autonomy_inputs *in, char *why, size_t whylen);

#endif
