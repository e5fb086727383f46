/*
 * cacheable.h - which requests the hub caches, and as what (docs/contracts.md §5).
 *
 * The component is the User-Agent up to the first '/', lower-cased.  A
 * request is cached when its component is a cache agent (the defaults, the
 * --cache-agents, or every component with "*"), it is a resource request
 * whose verb is get, list, watch, create, update or patch, its subresource
 * is none or "status", and its resource is not one of the review-like
 * resources whose objects are answers, not state (certificatesigningrequests,
 * subjectaccessreviews, ...).  Discovery documents are cached for everyone.
 */
#ifndef YURTHUB_CACHE_CACHEABLE_H
#define YURTHUB_CACHE_CACHEABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "kube/requestinfo.h"

enum cache_mode {
	CACHE_NONE,
	CACHE_OBJECT, /* get, or the object a create/update/patch returns */
	CACHE_LIST,
	CACHE_WATCH,
	CACHE_DISCOVERY, /* /version, /api, /api/v1, /apis, /apis/<g>/<v>, /openapi/v3... */
};

/* The defaults and --cache-agents, fixed at start; and the yurt-hub-cfg
 * configmap's cache_agents, which change while the hub runs (read under
 * the lock: connection threads ask, an informer's thread sets). */
struct cache_agents {
	struct strlist names;
	bool all;
	pthread_rwlock_t lock;
	bool lock_ready;
	struct strlist extra;
	bool extra_all;
};

/* Defaults plus --cache-agents. */
int cache_agents_init(struct cache_agents *a, const struct config *cfg);
void cache_agents_free(struct cache_agents *a);
bool cache_agents_has(struct cache_agents *a, const char *component);
/* Replace the configmap's agents ("*": every component); 0 or -1 (ENOMEM,
 * the old ones stay). */
int cache_agents_set_extra(struct cache_agents *a, const char *const *names, size_t n);

/* "kubelet/v1.30.2 (linux/amd64) kubernetes/abc" -> "kubelet" (malloc'ed,
 * "" for no User-Agent). */
char *cache_component(const char *user_agent);
/* The component of the multiplexer's upstream on node_name (its
 * User-Agent "multiplexer-proxy-<node>", lower-cased as components are);
 * malloc'ed, NULL on ENOMEM. */
char *cache_mux_component(const char *node_name);

/* How to cache this request, or CACHE_NONE. */
enum cache_mode cache_mode_for(struct cache_agents *a, const char *component,
			       const struct request_info *ri);

/* The Accept header to send upstream so that the response can be cached:
 * JSON when the client accepts plain JSON (it may prefer protobuf, or a
 * Table to print), or NULL when the request must go as it came (the client
 * accepts only other encodings, or partial object metadata).  Returns a
 * static string or NULL. */
const char *cache_accept_for(const char *client_accept);

#endif
